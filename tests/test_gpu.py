"""On a CUDA device: the seed candidates reproduce what an H200 showed for them (shared/seeds/README.md).

Run on the GPU machine: python3 -m pytest -m gpu
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kbench.config import RunConfig
from kbench.results import Status
from kbench.schedule.scheduler import run_pairs

from conftest import REPO

pytestmark = pytest.mark.gpu

SOLUTIONS = REPO / "solutions"
PROBLEMS = REPO / "problems"
# (solution, problem, verdict, message fragment)
EXPECTED = [
    ("convt1d/seed000_convt1d.py", "convt1d", Status.CORRECT, ""),
    ("convt1d/seed001_convt1d.py", "convt1d", Status.COMPILE_ERROR, "threadsPerBlock"),
    ("convt1d/seed002_convt1d.py", "convt1d", Status.LOAD_ERROR, "cuda_headers"),
    ("convt1d_dilated/seed003_convt1d_dilated.py", "convt1d_dilated", Status.CORRECT, ""),
    ("convt2d_asym/seed004_convt2d_asym.py", "convt2d_asym", Status.RUNTIME_ERROR, "TypeError"),
    ("convt1d.py", "convt1d", Status.CORRECT, ""),
]
# Strict-float32 eager reference medians measured on an H200 (DESIGN.md); other GPUs skip this check.
H200_STRICT_REFERENCE_MS = {"convt1d": 17.9, "convt1d_dilated": 4.26}


@pytest.fixture(scope="module")
def seed_results(gpu_cache_dir):
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=5.0)
    pairs = [(PROBLEMS / f"{problem}.py", SOLUTIONS / solution) for solution, problem, _, _ in EXPECTED]
    results = run_pairs(pairs, config, devices=["cuda:0"])
    return {solution: result for (solution, *_), result in zip(EXPECTED, results)}


@pytest.mark.parametrize("solution, problem, status, message", EXPECTED)
def test_seed_verdicts(seed_results, solution, problem, status, message):
    result = seed_results[solution]
    assert result.status == status, result.message
    assert message in result.message
    assert result.device_name == torch.cuda.get_device_name(0)


@pytest.mark.parametrize("solution", ["convt1d/seed000_convt1d.py", "convt1d_dilated/seed003_convt1d_dilated.py"])
def test_correct_seeds_are_slower_than_the_reference(seed_results, solution):
    result = seed_results[solution]
    assert result.speedup is not None and result.speedup < 1
    assert result.reference_timing.timer == "judge-clock"
    assert result.check.norm_err < 1e-5  # true float32 reference: a float32 kernel lands far below 1e-4
    if "H200" in result.device_name:
        recorded = H200_STRICT_REFERENCE_MS[result.problem]
        assert 0.7 * recorded < result.reference_timing.median_ms < 1.3 * recorded


def test_reference_under_pytorch_defaults_is_timed_too(seed_results):
    """convt1d's cuDNN reference uses TF32 under PyTorch's defaults: several times faster (DESIGN.md)."""
    result = seed_results["convt1d.py"]
    default_ms = result.baseline_median_ms("default")
    assert default_ms is not None and default_ms < result.reference_timing.median_ms
    assert result.policy == "strict-fp32"
    assert result.clocks is not None and result.clocks.sm_mhz_start, "SM clock not recorded"


def test_pytorch_policy_checks_and_times_against_the_tf32_reference(seed_results, gpu_cache_dir):
    from kbench.config import PYTORCH_DEFAULT

    strict = seed_results["convt1d.py"]
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir,
                       time_budget_s=3.0, sweep=0, policy=PYTORCH_DEFAULT)
    [result] = run_pairs([(PROBLEMS / "convt1d.py", SOLUTIONS / "convt1d.py")], config, devices=["cuda:0"])
    assert result.status == Status.CORRECT, result.message
    assert result.policy == PYTORCH_DEFAULT
    assert result.baseline_speedup("default") == result.speedup
    # The reference timed under this policy is the one the strict run timed as its "default" baseline.
    assert 0.8 < result.reference_timing.median_ms / strict.baseline_median_ms("default") < 1.25


def test_honest_seeds_carry_no_rejecting_flag(seed_results):
    from kbench.flags import REJECTING

    for solution, _, status, _ in EXPECTED:
        if status == Status.CORRECT:
            assert not set(seed_results[solution].flags) & set(REJECTING), solution
    assert seed_results["convt1d.py"].flags == ()


CHEATS = REPO / "tests" / "fixtures" / "cheats"
AXPY = REPO / "tests" / "fixtures" / "problems" / "axpy.py"
CONVT_SMALL = CHEATS / "problems" / "convt1d_small.py"
# (fixture, problem, acceptable verdicts, flag that must be present or None)
GPU_CHEATS = [
    # Work left on another stream is inside the judge's clock around the batch (the judge holds the outputs only
    # once it is done), or missing from the outputs (stale_output).
    ("side_stream.py", AXPY, {Status.REJECTED, Status.CORRECT}, None),
    ("thread_side.py", AXPY, {Status.REJECTED, Status.INCORRECT, Status.CORRECT}, None),
    ("uninit_reuse.py", AXPY, {Status.INCORRECT, Status.REJECTED}, None),
    ("honest_two_streams.py", AXPY, {Status.CORRECT}, None),
    ("honest_cuda_kernel.py", CONVT_SMALL, {Status.CORRECT}, None),
]


@pytest.fixture(scope="module")
def cheat_results(gpu_cache_dir):
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0)
    results = run_pairs([(problem, CHEATS / name) for name, problem, _, _ in GPU_CHEATS], config, devices=["cuda:0"])
    return {name: result for (name, *_), result in zip(GPU_CHEATS, results)}


@pytest.mark.parametrize("name, problem, statuses, flag", GPU_CHEATS)
def test_gpu_cheats_are_caught_and_honest_kernels_pass(cheat_results, name, problem, statuses, flag):
    from kbench.flags import REJECTING

    result = cheat_results[name]
    assert result.status in statuses, (result.status, result.message)
    if name in ("side_stream.py", "thread_side.py") and result.status == Status.CORRECT:
        # No gain: slower than the reference, or its time kept out of trusted figures.
        assert result.speedup < 1.1 or "unverified_time" in result.flags, result.message
    if flag:
        assert flag in result.flags, result.message
    if statuses == {Status.CORRECT}:
        assert not set(result.flags) & set(REJECTING), result.flags


BOUNDARY_GPU = REPO / "tests" / "fixtures" / "boundary" / "gpu"
CONVT_LARGE = CHEATS / "problems" / "convt1d_large.py"


@pytest.fixture(scope="module")
def boundary_results(gpu_cache_dir):
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)
    names = ["fake_events.py", "early_reply.py", "work_after_clock.py"]
    results = run_pairs([(CONVT_LARGE, BOUNDARY_GPU / name) for name in names], config, devices=["cuda:0"])
    return dict(zip(names, results))


@pytest.mark.parametrize("name", ["fake_events.py", "early_reply.py", "work_after_clock.py"])
def test_gpu_a_runner_s_own_clock_and_work_after_its_reply_gain_nothing(boundary_results, name):
    """The recorded time is the judge's clock around a batch, stopped once it holds its own copy of the outputs:
    events that lie are never read, and work done in the output's copy or left queued at the reply is inside it
    (or missing from the outputs). Each fixture does the reference's own convolution: its true speedup is 1, its
    lie 10x or more."""
    result = boundary_results[name]
    if name == "fake_events.py":  # honest work: correct, at its true speed
        assert result.status == Status.CORRECT, (result.status, result.message)
    assert result.status != Status.CORRECT or abs(result.speedup - 1) <= 0.05, (result.status, result.speedup,
                                                                                result.message)


@pytest.mark.parametrize("name", ["queued_after_reply.py", "queued_short_kernels_after_reply.py"])
def test_gpu_work_queued_after_the_reply_slows_no_reference(gpu_cache_dir, name):
    """The candidate's runner is stopped while the reference is timed, but not the kernels it queued: the judge
    waits until the GPU is free of them (quiet.py). Each fixture computes what the reference computes and queues a
    spin after each timed reply, one long kernel or thousands of short ones: its speedup stays that of the same
    kernel, or it is rejected."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)
    result, = run_pairs([(CHEATS / "problems" / "convt1d_long.py", BOUNDARY_GPU / name)], config, devices=["cuda:0"])
    if result.status == Status.CORRECT:
        assert result.speedup < 1.15, (result.speedup, result.message)
    else:
        assert result.status == Status.REJECTED and "slowed_reference" in result.flags, (result.status, result.message)


WORKLOADS = REPO / "bench" / "workloads"


def test_a_gigabyte_output_is_judged_through_the_arenas(gpu_cache_dir):
    """1 GiB in and out: the output crosses the judge's arenas, and its copy is the protocol's, not hidden work."""
    config = RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)
    result, = run_pairs([(WORKLOADS / "problems" / "relu_large.py", WORKLOADS / "solutions" / "relu_large.py")],
                        config, devices=["cuda:0"])
    from kbench.flags import REJECTING
    assert result.status == Status.CORRECT and not set(result.flags) & set(REJECTING), result.message


def test_a_build_creates_no_cuda_context(tmp_path):
    """Builds only compile: with 128 at once on a 64-core host, each build's judge and runners creating a CUDA
    context on cuda:0 ran it out of memory before anything was judged. nvidia-smi, polled while a CUDA solution
    builds cold, never lists the build's judge or its runners."""
    import subprocess
    import threading

    from kbench.schedule.child import EvaluationOptions, evaluate

    def on_gpu() -> set[int]:
        listing = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout
        return {int(line) for line in listing.split() if line.strip().isdigit()}

    def parent_of(pid: int) -> int | None:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    seen, builds, done = set(), set(), threading.Event()

    def record(progress) -> None:  # the build's runners, and the judge that started them
        for runner in progress.runner_sessions:
            builds.update(pid for pid in (runner, parent_of(runner)) if pid)

    def watch() -> None:
        while not done.is_set():
            seen.update(on_gpu())
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    config = RunConfig(device="cuda", cache_dir=tmp_path / "cache", time=False)
    try:
        built = evaluate(PROBLEMS / "convt1d.py", SOLUTIONS / "convt1d" / "seed000_convt1d.py", config,
                         EvaluationOptions(device="cuda:0", build_only=True, on_progress=record))
    finally:
        done.set()
        watcher.join()
    assert built.status == Status.BUILT and not built.build_reused, built.message
    assert builds, "the build's processes were never seen"
    assert not seen & builds, f"the build's processes with a CUDA context: {seen & builds}"


def test_compile_error_names_the_redeclared_variable(seed_results):
    result = seed_results["convt1d/seed001_convt1d.py"]
    assert "error" in result.message and "threadsPerBlock" in result.message
    assert "threadsPerBlock" in Path(result.log_path).read_text()


def test_illegal_memory_access_is_a_runtime_error(tmp_path):
    """A kernel writing far out of bounds corrupts the context: the verdict still comes back."""
    solution = tmp_path / "oob.py"
    solution.write_text(OUT_OF_BOUNDS)
    problem = REPO / "tests" / "fixtures" / "problems" / "axpy.py"
    config = RunConfig(device="cuda", cache_dir=tmp_path / "cache", time=False)
    [result] = run_pairs([(problem, solution)], config, devices=["cuda:0"])
    assert result.status == Status.RUNTIME_ERROR, result.message
    assert "illegal" in result.message.lower() or "CUDA error" in result.message


OUT_OF_BOUNDS = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
__global__ void scribble(float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    out[i * 1000000007L] = 1.0f;  // far outside the allocation
}
torch::Tensor run(torch::Tensor x, torch::Tensor y, double alpha) {
    auto out = torch::empty_like(x);
    scribble<<<64, 256>>>(out.data_ptr<float>(), out.numel());
    return out;
}
"""
ext = load_inline(name="kbench_oob", cpp_sources="torch::Tensor run(torch::Tensor x, torch::Tensor y, double alpha);",
                  cuda_sources=cuda_source, functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return ext.run(x, y, self.alpha)
'''


def test_every_thread_of_the_candidate_s_runner_is_confined_on_a_gpu(tmp_path):
    """Importing torch's extension builder asks whether CUDA is available, which initialises CUDA's driver: in
    the runner that started a driver thread before it confined itself (a thread with the runner's full rights,
    where a candidate's code could run), and in the fork server every judge forked from it failed to warm up.
    kbench answers that question for the import (extensions.import_extension_builder: asking NVML starts a
    thread too); the driver starts once the runner is confined, and names its threads in the runner's own /proc
    folder (limits.py)."""
    from kbench.schedule.child import EvaluationOptions, evaluate

    config = RunConfig(device="cuda", cache_dir=tmp_path, sweep=0, timeout_s=120)
    fixtures = REPO / "tests" / "fixtures"
    result = evaluate(fixtures / "problems" / "axpy.py", fixtures / "boundary" / "escape.py", config,
                      EvaluationOptions(device="cuda:0"))
    assert result.status == Status.LOAD_ERROR, result.message
    assert "threads:all-confined" in result.message, result.message
    assert "judge-memory:denied" in result.message, result.message
    assert "thread-name:writable" in result.message, result.message  # the driver's threads name themselves


RELU_MEDIUM = REPO / "bench" / "workloads" / "problems" / "relu_medium.py"
GPU_FIXTURES = REPO / "tests" / "fixtures" / "gpu"
HELD = "outputs read where the calls left them"  # sides.BatchPlan.describe
COPIED = "timing again with outputs copied into the ring's slots"


@pytest.fixture(scope="module")
def held_results(tmp_path_factory):
    """Plain PyTorch candidates: nothing to build (no gpu_cache_dir, which builds every CUDA fixture first)."""
    config = RunConfig(device="cuda", cache_dir=tmp_path_factory.mktemp("held"), time_budget_s=2.0, sweep=0)
    pairs = {"own_ops": (RELU_MEDIUM, REPO / "bench" / "workloads" / "solutions" / "relu_medium.py"),
             "graph_replay": (RELU_MEDIUM, GPU_FIXTURES / "graph_replay.py"),
             "unopenable_handles": (RELU_MEDIUM, BOUNDARY_GPU / "unopenable_handles.py"),
             "held_elsewhere": (RELU_MEDIUM, BOUNDARY_GPU / "held_elsewhere.py"),
             "expanded_output": (GPU_FIXTURES / "problems" / "row_means_repeated.py",
                                 GPU_FIXTURES / "expanded_output.py"),
             "stale_in_batch": (REPO / "tests" / "fixtures" / "problems" / "axpy.py",
                                REPO / "tests" / "fixtures" / "boundary" / "stale_in_batch.py")}
    results = run_pairs(list(pairs.values()), config, devices=["cuda:0"])
    return {name: (result, Path(result.log_path).read_text(errors="replace")) for name, result in zip(pairs, results)}


def test_outputs_are_read_where_the_calls_left_them(held_results):
    """No runner copy of an output is timed (runner/held.py): the reference's own ReLU as the candidate is timed with
    its outputs held, on both sides, at a speedup of 1."""
    result, log = held_results["own_ops"]
    assert result.status == Status.CORRECT, result.message
    assert f"call(s), {HELD}" in log and COPIED not in log, log[-2000:]
    assert 0.97 <= result.speedup <= 1.03, result.speedup


def test_outputs_a_later_call_overwrites_are_timed_with_copies_and_stay_correct(held_results):
    """An honest CUDA graph replay returns the same static output every call: the judge sees two calls' outputs in
    the same memory and times every side again with copies; correct, no rejecting flag."""
    result, log = held_results["graph_replay"]
    assert result.status == Status.CORRECT, result.message
    assert COPIED in log and "share memory" in log, log[-2000:]


def test_an_output_whose_elements_share_memory_is_timed_with_copies(held_results):
    """An expanded view's copy reads less than the dense copy the judge calibrated: not read where it lies."""
    result, log = held_results["expanded_output"]
    assert result.status == Status.CORRECT, result.message
    assert COPIED in log and "share memory or leave gaps" in log, log[-2000:]


def test_handles_that_do_not_open_send_the_timing_back_to_copies(held_results):
    result, log = held_results["unopenable_handles"]
    assert result.status == Status.CORRECT, result.message
    assert COPIED in log and "does not open" in log, log[-2000:]
    assert 0.95 <= result.speedup <= 1.05, result.speedup


@pytest.mark.parametrize("name", ["held_elsewhere", "stale_in_batch"])
def test_outputs_named_where_they_are_not_or_remembered_are_stale(held_results, name):
    """A runner that names places that do not hold its calls' outputs, or returns an earlier call's output, gains
    nothing from held outputs: the check fails where they are held and again on copies."""
    result, _ = held_results[name]
    assert result.status == Status.REJECTED and "stale_output" in result.flags, (result.status, result.message)
