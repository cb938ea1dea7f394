"""On a CUDA device: a lost CUDA context and a float32 reference less accurate than the candidate do not cost
a candidate its verdict (tests/fixtures/gpu/README.md).

Run on the GPU machine: python3 -m pytest -m gpu
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kbench import flags
from kbench.config import RunConfig
from kbench.results import Status
from kbench.schedule.scheduler import run_pairs

from conftest import FIXTURES, PROBLEMS

pytestmark = pytest.mark.gpu

GPU = FIXTURES / "gpu"
WORKLOADS = Path(__file__).resolve().parents[1] / "bench" / "workloads"
PAIRS = {
    "oob_at_other_sizes.py": PROBLEMS / "axpy.py",
    "breaks_context_in_trials.py": PROBLEMS / "axpy.py",
    "double_accumulation.py": PROBLEMS / "cancellation.py",
    "bindings_in_the_cuda_file.py": PROBLEMS / "axpy.py",
    "raises_under_the_kernel_profiler.py": PROBLEMS / "axpy.py",
}


def test_a_cuda_file_that_needs_torch_s_whole_header_builds_with_it_and_the_others_build_light(results):
    """kbench/extensions/light.py on real builds: the file with its own bindings fails the light compile and is
    compiled as torch would; a file that needs only torch/types.h says nothing of it (the session built every
    CUDA fixture in gpu_cache_dir)."""
    result = results["bindings_in_the_cuda_file.py"]
    assert result.status == Status.CORRECT, result.message
    build_logs = {log.name: log.read_text(errors="replace") for log in Path(result.log_path).parent.glob("*.log")}
    whole = [text for name, text in build_logs.items() if name.startswith("bindings_in_the_cuda_file")]
    light = [text for name, text in build_logs.items() if name.startswith("double_accumulation")]
    # each fixture has several logs (its build, a build phase that found it built, its evaluation): one says so
    assert any("uses more of torch than torch/types.h" in text for text in whole), build_logs.keys()
    assert light and not any("uses more of torch" in text for text in light)


@pytest.fixture(scope="module")
def results(gpu_cache_dir):
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=1.0, sweep=8)
    pairs = [(problem, GPU / solution) for solution, problem in PAIRS.items()]
    return {Path(result.solution).name: result for result in run_pairs(pairs, config, devices=["cuda:0"])}


def test_a_kernel_that_breaks_the_context_at_other_sizes_keeps_its_official_verdict(results):
    result = results["oob_at_other_sizes.py"]
    assert result.status == Status.CORRECT, result.message
    assert flags.SWEEP_FAILED in result.flags
    assert "illegal memory access" in result.sweep.first_failure, result.sweep
    assert "n=" in result.sweep.first_failure  # the configuration that failed
    assert "while done" not in result.message and result.speedup is not None


def test_a_forward_that_raises_under_the_kernel_profiler_is_a_runtime_error_called_once(results):
    """The runner profiles one call's kernels (library_only); the profiler says nothing of its own failures, but
    the candidate's error is its verdict, not a reason to call the forward again unprofiled and pass."""
    result = results["raises_under_the_kernel_profiler.py"]
    assert result.status == Status.RUNTIME_ERROR, (result.status, result.message)
    assert "refuses to run under the kernel profiler" in result.message, result.message


def test_a_context_lost_in_the_trials_is_a_runtime_error_naming_the_phase(results):
    result = results["breaks_context_in_trials.py"]
    assert result.status == Status.RUNTIME_ERROR, result.message
    assert "while checking" in result.message and "illegal memory access" in result.message


def test_an_honest_kernel_more_accurate_than_the_reference_is_correct(results):
    result = results["double_accumulation.py"]
    assert result.status == Status.CORRECT, result.message
    assert result.check.truth_trials > 0 and result.check.truth_candidate_err < result.check.truth_reference_err
    assert flags.SWEEP_FAILED not in result.flags, result.sweep


@pytest.fixture(scope="module")
def card_sized(gpu_cache_dir):
    """An honest candidate on inputs of a fifth and of 0.45 of the card (no sweep: its sizes are the card's)."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=1.0, sweep=0)
    pairs = [(GPU / "problems" / f"{problem}.py", GPU / "row_sum_torch.py")
             for problem in ("rows_fifth_of_card", "rows_too_big_for_the_copies")]
    pairs.append((GPU / "problems" / "rows_fifth_of_card.py", GPU / "hoard_memory.py"))
    return {(Path(result.problem).stem, Path(result.solution).stem): result
            for result in run_pairs(pairs, config, devices=["cuda:0"])}


def test_inputs_of_a_fifth_of_the_card_fit_the_judges_copies(card_sized):
    result = card_sized["rows_fifth_of_card", "row_sum_torch"]
    assert result.status == Status.CORRECT, result.message
    assert result.speedup is not None


def test_inputs_too_large_for_the_judges_copies_are_an_infra_error_not_the_candidates(card_sized):
    result = card_sized["rows_too_big_for_the_copies", "row_sum_torch"]
    assert result.status == Status.INFRA_ERROR, result.message
    assert "kbench ran out of GPU memory while" in result.message and "GiB" in result.message


def test_a_candidate_that_hoards_memory_is_blamed_when_the_judges_copies_do_not_fit(card_sized):
    result = card_sized["rows_fifth_of_card", "hoard_memory"]
    assert result.status == Status.RUNTIME_ERROR, result.message
    assert "OutOfMemoryError" in result.message


def test_the_reference_s_own_kernels_as_the_candidate_read_the_reference_s_time(gpu_cache_dir):
    """Both runners time alike: the candidate's runner profiles kernels (its warm-up, library_only) and must
    leave no profiler instrumentation behind in its timed calls (left on, this five-kernel block read 10% slow).
    The timing-fidelity workload: its candidate is the reference's own ops."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)
    [result] = run_pairs([(WORKLOADS / "problems" / "mlp_block.py", WORKLOADS / "solutions" / "mlp_block.py")],
                         config, devices=["cuda:0"])
    assert result.status == Status.CORRECT, result.message
    assert 0.96 <= result.speedup <= 1.04, (result.speedup, result.message)


def test_short_calls_of_the_reference_s_own_ops_read_its_time_without_unverified_time(gpu_cache_dir):
    """Calls of 5-70 us are timed in batches the judge's clock resolves to 1% of a call, or 1 us (timed_sides.py):
    the reference's own ops as the candidate read a speedup of 1 within 2%, and no gain goes unconfirmed."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)
    names = ["relu_medium", "sum_rows", "softmax"]
    results = run_pairs([(WORKLOADS / "problems" / f"{name}.py", WORKLOADS / "solutions" / f"{name}.py")
                         for name in names], config, devices=["cuda:0"])
    for name, result in zip(names, results):
        assert result.status == Status.CORRECT, (name, result.message)
        assert 0.98 <= result.speedup <= 1.02 and "unverified_time" not in result.flags, (name, result.speedup,
                                                                                          result.flags)


def test_the_reference_s_time_alone_reads_its_time_in_the_timing_loop_on_short_calls(gpu_cache_dir):
    """The time alone (before the candidate is imported) takes the timing loop's fixed cost per batch, so a short
    reference reads the same time there as beside the candidate: a slowdown (slowed_reference) is seen against the
    call's own time, not against the judge's per-batch cost."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=1.0, sweep=0)
    [result] = run_pairs([(WORKLOADS / "problems" / "relu_medium.py", WORKLOADS / "solutions" / "relu_medium.py")],
                         config, devices=["cuda:0"])
    assert result.status == Status.CORRECT, result.message
    alone, during = result.reference_alone.median_ms, result.reference_timing.median_ms
    assert 0.7 <= alone / during <= 1.4, (alone, during)


# Another process's GPU work, which no candidate asked for: matrix products back to back for `seconds`.
LOAD = """
import sys, time, torch
a = torch.rand(8192, 8192, device="cuda")
print("loading", flush=True)
ends = time.monotonic() + float(sys.argv[1])
while time.monotonic() < ends:
    for _ in range(20):
        a = torch.mm(a, a).clamp_(0, 1)
    torch.cuda.synchronize()
"""


def test_another_process_s_gpu_work_is_never_the_honest_candidate_s_rejection(gpu_cache_dir):
    """A GPU busy with another process's work slows the reference beside the candidate, and keeps the GPU busy
    while the candidate's runner is stopped. The judge tests its suspect (kills the candidate's runner; quiet.py,
    reference_side.check_slowed_reference): with another process to blame, an honest candidate is never `rejected`;
    the evaluation is correct (its times flagged or not) or the machine's failure."""
    load = subprocess.Popen([sys.executable, "-c", LOAD, "40"], stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout.readline().strip() == "loading"
        config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)
        results = run_pairs([(WORKLOADS / "problems" / f"{name}.py", WORKLOADS / "solutions" / f"{name}.py")
                             for name in ("relu_medium", "relu_large")], config, devices=["cuda:0"])
    finally:
        load.kill()
        load.wait()
    for result in results:
        assert result.status in (Status.CORRECT, Status.INFRA_ERROR), (result.status, result.message)
        assert flags.SLOWED_REFERENCE not in result.flags, result.message
