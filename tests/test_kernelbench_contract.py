"""KernelBench's contract on kbench's entry point (kbench.eval_kernel_against_ref), called with KernelBench's own
keyword names: its units and metadata, its keywords checked, its precisions cast and toleranced as KernelBench does,
one warm judge across calls; and the reward a training loop reads (Result.reward, kbench.reward)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import textwrap

import pytest
import torch

import kbench
from kbench.api import warm_judge
from kbench.kernelbench_entry import kernel_exec_result
from kbench.config import RunConfig
from kbench.results import Result, Status, Timing

from conftest import REPO
from test_api import alive_after_a_moment, descendants

RELU = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n" \
       "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64, 256)]\n\n" \
       "def get_init_inputs():\n    return []\n"
RELU_CANDIDATE = "import torch\n\nclass ModelNew(Model):\n    def forward(self, x):\n        return x.clamp_min(0)\n"

# A model with parameters; the candidate checks what it is given: at bfloat16 its weights and its input must be cast.
LINEAR = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.linear = nn.Linear(features, features)

        def forward(self, x):
            return self.linear(x)

    def get_inputs():
        return [torch.randn(8, 32)]

    def get_init_inputs():
        return [32]
''')
LINEAR_CHECKS_DTYPES = textwrap.dedent('''
    import torch
    import torch.nn.functional as F

    class ModelNew(Model):
        def forward(self, x):
            dtypes = {x.dtype, self.linear.weight.dtype, self.linear.bias.dtype}
            if dtypes != {torch.bfloat16}:
                raise RuntimeError(f"given {dtypes}")
            return F.linear(x, self.linear.weight, self.linear.bias)
''')

# The reference's output is float32 whatever the precision; the candidate's is off by 0.3%: within KernelBench's
# bfloat16 tolerance (1e-2, on every output at that precision), far outside float32's (1e-4), float64 truth or not.
FLOAT_OUT = RELU.replace("return torch.relu(x)", "return x.float() * 2")
FLOAT_OUT_OFF = "import torch\n\nclass ModelNew(Model):\n    def forward(self, x):\n" \
                "        return x.float() * 2 * 1.003\n"

# A bfloat16 reference that rounds after every addition is far off the exact sum (past 512, where bfloat16's spacing
# is 4, adding a value below 2 adds nothing); a candidate that adds in float32 and rounds once is not: the float64 truth (the reference in float64, from the same cast inputs) decides for it.
ROUNDING_SUM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            total = torch.zeros_like(x[:, 0])
            for column in range(x.shape[1]):
                total = total + x[:, column]
            return total

    def get_inputs():
        return [torch.rand(8, 512) + 1.0]

    def get_init_inputs():
        return []
''')
EXACT_SUM = "import torch\n\nclass ModelNew(Model):\n    def forward(self, x):\n" \
            "        return x.float().sum(dim=1).to(x.dtype)\n"


def call(reference: str, candidate: str, tmp_path, **keywords):
    return kbench.eval_kernel_against_ref(reference, candidate, build_dir=tmp_path / "cache", **keywords)


# ---- units and metadata ----------------------------------------------------------------------------------------

def test_runtimes_are_kernelbench_s_milliseconds_means_and_kbench_s_median_sits_in_the_stats(tmp_path):
    result = call(RELU, RELU_CANDIDATE, tmp_path, seed_num=42, num_correct_trials=2, num_perf_trials=5,
                  measure_performance=True)
    assert result.compiled and result.correctness, result.metadata
    for value, stats, timing in ((result.runtime, result.runtime_stats, result.result.candidate_timing),
                                 (result.ref_runtime, result.ref_runtime_stats, result.result.reference_timing)):
        # KernelBench's runtime: the mean of the timed calls in ms, to three significant figures (get_timing_stats).
        assert value == float(f"{statistics.fmean(timing.samples_ms):.3g}") and value > 0
        assert stats["mean"] == value and stats["num_trials"] == timing.count >= 5
        assert stats["min"] <= value <= stats["max"]
        assert stats["median_ms"] == timing.median_ms and stats["iqr_ms"] == timing.iqr_ms
        assert stats["device"] == "cpu" and "hardware" in stats
    assert result.metadata["correctness_trials"] == "(2 / 2)" and result.metadata["device"] == "cpu"
    assert result.metadata["kbench_status"] == Status.CORRECT
    assert "excessive_speedup" not in result.metadata  # the same op on both sides is not 10x faster


def test_metadata_keys_are_kernelbench_s_for_each_failure(tmp_path):
    wrong = call(RELU, RELU_CANDIDATE.replace("clamp_min(0)", "clamp_min(0.25)"), tmp_path)
    assert wrong.compiled and not wrong.correctness and wrong.runtime == -1.0
    assert wrong.metadata["correctness_issue"].startswith("trial 0: output")
    assert float(wrong.metadata["max_difference"][0]) == pytest.approx(0.25, abs=1e-6)
    broken = call(RELU, "class ModelNew(:\n", tmp_path)
    assert not broken.compiled and "SyntaxError" in broken.metadata["compilation_error"]
    assert broken.metadata["compilation_error_name"] == "kbench.load_error"
    raises = call(RELU, RELU_CANDIDATE.replace("return x.clamp_min(0)", "raise RuntimeError('boom')"), tmp_path)
    assert raises.compiled and not raises.correctness and "boom" in raises.metadata["runtime_error"]
    assert raises.metadata["runtime_error_name"] == "kbench.runtime_error"


def timed_result(reference_ms: float, candidate_ms: float, status: str = Status.CORRECT,
                 flags: tuple[str, ...] = ()) -> Result:
    return Result.from_fields(problem="p", solution="s.py", status=status, flags=flags, device="cuda:0",
                              device_name="NVIDIA H200",
                              reference_timing=Timing((reference_ms,) * 3, "cuda-events"),
                              candidate_timing=Timing((candidate_ms,) * 3, "cuda-events"))


def test_excessive_speedup_is_flagged_as_kernelbench_flags_it():
    fast = kernel_exec_result(timed_result(12.0, 1.0))
    assert fast.metadata["excessive_speedup"] is True and fast.ref_runtime / fast.runtime == 12.0
    assert "excessive_speedup" not in kernel_exec_result(timed_result(12.0, 1.0), excessive_speedup_threshold=20).metadata
    assert "excessive_speedup" not in kernel_exec_result(timed_result(12.0, 1.0), check_for_excessive_speedup=False).metadata
    assert "excessive_speedup" not in kernel_exec_result(timed_result(9.0, 1.0)).metadata


# ---- keywords --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("keywords, error, says", [
    ({"num_corect_trials": 50}, TypeError, "num_corect_trials"),
    ({"backend": "cudaa"}, ValueError, "backend"),
    ({"backend": "tilelang"}, ValueError, "TileLang"),              # float32: KernelBench refuses it too
    ({"precision": torch.float64}, ValueError, "precision"),
    ({"precision": "fp8"}, ValueError, "precision"),
    ({"timing_method": "wall"}, ValueError, "timing method"),
])
def test_a_keyword_kernelbench_would_not_take_is_refused_before_anything_runs(keywords, error, says):
    with pytest.raises(error, match=says):
        kbench.eval_kernel_against_ref(RELU, RELU_CANDIDATE, **keywords)


# ---- precision -------------------------------------------------------------------------------------------------

def test_bfloat16_casts_inputs_and_both_models_parameters(tmp_path):
    result = call(LINEAR, LINEAR_CHECKS_DTYPES, tmp_path, precision=torch.bfloat16, num_correct_trials=2,
                  measure_performance=True, num_perf_trials=3)
    assert result.correctness, result.metadata  # the timed reference (the reference's runner) ran in bfloat16 too
    assert result.result.precision == "bfloat16" and result.ref_runtime > 0
    float32 = call(LINEAR, LINEAR_CHECKS_DTYPES, tmp_path, precision=torch.float32)
    assert float32.compiled and not float32.correctness and "float32" in float32.metadata["runtime_error"]


def test_half_precisions_use_kernelbench_s_tolerance_on_every_output(tmp_path):
    for precision in (torch.bfloat16, "fp16"):
        result = call(FLOAT_OUT, FLOAT_OUT_OFF, tmp_path, precision=precision)
        assert result.correctness, (precision, result.metadata)
    strict = call(FLOAT_OUT, FLOAT_OUT_OFF, tmp_path, precision=torch.float32)
    assert strict.compiled and not strict.correctness and "atol=0.0001" in strict.metadata["correctness_issue"]


def test_the_float64_truth_still_decides_a_bfloat16_disagreement(tmp_path):
    result = call(ROUNDING_SUM, EXACT_SUM, tmp_path, precision=torch.bfloat16, num_correct_trials=2)
    assert result.correctness, result.metadata
    check = result.result.check
    assert check.truth_trials == 2 and check.truth_candidate_err < check.truth_reference_err


def test_the_cli_records_the_precision_in_its_column_and_its_settings_hash(tmp_path):
    problem, solution = tmp_path / "relu.py", tmp_path / "relu_new.py"
    problem.write_text(RELU)
    solution.write_text(RELU_CANDIDATE)
    out = tmp_path / "results.csv"
    for precision in ("bfloat16", "float32"):
        completed = subprocess.run(
            [sys.executable, "-m", "kbench", "eval", "--problem", problem, solution, "--device", "cpu", "--no-time",
             "--sweep", "0", "--precision", precision, "--out", out], capture_output=True, text=True, timeout=600,
            env=dict(os.environ, PYTHONPATH=str(REPO), KBENCH_CACHE_DIR=str(tmp_path / "cache")))
        assert completed.returncode == 0, completed.stderr
    rows = kbench.read_results(out)
    assert list(rows["precision"]) == ["bfloat16", "float32"] and rows["settings"].nunique() == 2
    # float32, the default, leaves the settings hash of earlier runs as it was: the hash of the settings without it
    earlier = RunConfig(device="cpu", time=False, sweep=0).to_dict()
    earlier = {key: value for key, value in earlier.items()
               if key not in ("cache_dir", "timeout_s", "build_timeout_s", "call_timeout_s", "device", "precision")}
    digest = hashlib.sha256(json.dumps({**earlier, "device_kind": "cpu"}, sort_keys=True).encode()).hexdigest()
    assert rows["settings"].iloc[1] == digest[:12]


# ---- one warm judge --------------------------------------------------------------------------------------------

def test_calls_share_one_warm_judge_whose_processes_stay_between_calls(tmp_path):
    first = call(RELU, RELU_CANDIDATE, tmp_path)
    judge = warm_judge(["cpu"])
    between = descendants(os.getpid())
    assert first.correctness and between, "the warm judge's processes are gone after its call"
    second = call(RELU, RELU_CANDIDATE, tmp_path)
    assert second.correctness and warm_judge(["cpu"]) is judge
    assert not judge._closed
    # the processes that waited between the calls served the second: they are still there (its fork servers)
    assert between & descendants(os.getpid())


def test_the_warm_judge_ends_its_processes_at_exit(tmp_path):
    script = (f"import os, kbench\nfrom test_api import descendants\n"
              f"result = kbench.eval_kernel_against_ref({RELU!r}, {RELU_CANDIDATE!r}, build_dir={str(tmp_path)!r})\n"
              f"assert result.correctness, result.metadata\n"
              f"print('PIDS', *descendants(os.getpid()), flush=True)\n")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")])))
    assert completed.returncode == 0, completed.stderr
    pids = {int(pid) for pid in completed.stdout.split("PIDS", 1)[1].split()}
    assert pids and not alive_after_a_moment(pids)


def test_dir_lists_the_public_api():
    assert {"Judge", "judge", "eval_kernel_against_ref", "KernelExecResult", "reward", "Result", "Status",
            "RunConfig", "read_results", "results_frame"} == set(kbench.__all__) <= set(dir(kbench))
    for name in kbench.__all__:
        assert getattr(kbench, name) is not None
    importlib.import_module("kbench.judge.check")  # the package kbench.judge, once imported, still calls the API's
    assert callable(kbench.judge) and kbench.judge.check.compare  # judge


# ---- reward ----------------------------------------------------------------------------------------------------

def test_reward_is_the_judge_s_speedup_when_correct_and_ignores_measurement_warnings():
    plain = timed_result(2.0, 1.0)
    assert plain.reward == kbench.reward(plain) == plain.speedup == 2.0
    for warnings in (("unverified_time",), ("noisy_timing", "throttled")):
        assert timed_result(2.0, 1.0, flags=warnings).reward == 2.0  # the recipe `not flags` flipped here
    assert timed_result(2.0, 1.0, flags=("calls_reference_op",)).reward == 2.0  # noting: the verdict stands
    assert timed_result(2.0, 1.0, flags=("stale_output",)).reward == 0.0  # a rejecting flag never pays
    for status in (Status.INCORRECT, Status.REJECTED, Status.COMPILE_ERROR, Status.TIMEOUT, Status.INFRA_ERROR):
        assert timed_result(2.0, 1.0, status=status).reward == 0.0
    untimed = Result.from_fields(problem="p", solution="s.py", status=Status.CORRECT)
    assert untimed.reward == 1.0
    assert kbench.reward(kernel_exec_result(plain)) == kernel_exec_result(plain).reward == 2.0
    assert timed_result(2.0, 1.0).to_row()["reward"] == 2.0


def test_reward_of_a_real_run_is_its_speedup_or_zero(tmp_path):
    right = call(RELU, RELU_CANDIDATE, tmp_path, measure_performance=True, num_perf_trials=3)
    assert right.correctness and right.reward == right.result.speedup > 0
    wrong = call(RELU, RELU_CANDIDATE.replace("clamp_min(0)", "clamp_min(1)"), tmp_path, measure_performance=True)
    assert wrong.reward == kbench.reward(wrong.result) == 0.0


# ---- on a GPU --------------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_a_gpu_bfloat16_is_cast_and_times_are_cuda_event_milliseconds(tmp_path):
    result = call(LINEAR, LINEAR_CHECKS_DTYPES, tmp_path, device=0, precision=torch.bfloat16, num_correct_trials=3,
                  measure_performance=True, num_perf_trials=20)
    assert result.compiled and result.correctness, result.metadata
    assert result.metadata["device"] == "cuda:0" and result.metadata["hardware"] == torch.cuda.get_device_name(0)
    assert result.runtime_stats["timer"] == "judge-clock" and result.runtime_stats["num_trials"] >= 20
    # a linear layer of 8x32 takes microseconds: in milliseconds its mean is well below one
    assert 0 < result.runtime < 1 and 0 < result.ref_runtime < 1
    assert result.reward == result.result.speedup > 0
