"""End to end: the cheats of DESIGN.md items 9-14 and their honest look-alikes, judged by kbench.

"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbench.config import RunConfig
from kbench.flags import LIBRARY_ONLY, REFERENCE_TAMPERING, REJECTING, SLOWED_REFERENCE
from kbench.results import Status
from kbench.runner import evaluate

from conftest import FIXTURES, PROBLEMS, judged

CHEATS = FIXTURES / "cheats"
CONVT = CHEATS / "problems" / "convt1d_small.py"
CONVT_LARGE = CHEATS / "problems" / "convt1d_large.py"
PREFIX_SUM = CHEATS / "problems" / "prefix_sum.py"
ROW_SUM = CHEATS / "problems" / "row_sum.py"
CHAIN = CHEATS / "problems" / "elementwise_chain.py"
AXPY = PROBLEMS / "axpy.py"


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> RunConfig:
    """CPU evaluation, short timing budget; no prebuilt C++ fixtures (the plain ones need none)."""
    return RunConfig(device="cpu", cache_dir=tmp_path_factory.mktemp("reference-cheats"), timeout_s=300,
                     time_budget_s=0.5, min_samples=3, sweep=0)


def rejecting(flags) -> set:
    return set(flags) & set(REJECTING)


def test_behaving_differently_while_timed_is_stale_output(config):
    result = evaluate(CONVT, CHEATS / "timed_detector.py", config)
    assert result.status == Status.REJECTED and "stale_output" in result.flags, result.message


@pytest.mark.parametrize("solution, problem", [("honest_weight_cache.py", CONVT), ("honest_fast.py", PREFIX_SUM),
                                               ("honest_helper_thread.py", CONVT)])
def test_honest_look_alikes_stay_clean(config, solution, problem):
    result = evaluate(problem, CHEATS / solution, config)
    assert result.status == Status.CORRECT, result.message
    assert result.flags == (), result.message
    if solution == "honest_fast.py":
        assert result.speedup > 1


@pytest.mark.parametrize("solution, name", [
    ("slow_reference.py", "Model.forward"),
    ("slow_reference_global.py", "torch.nn.modules.conv.F"),
    ("slow_reference_weights.py", "parameter conv.weight contents"),
    ("answer_through_reference.py", "Model.forward"),  # a change that undoes itself when the reference runs
    ("answer_through_reference_timed.py", "Model.forward"),  # the same, in the timing loop only
])
def test_changing_the_reference_is_tampering(config, solution, name):
    result = evaluate(CONVT, CHEATS / solution, config)
    assert result.status == Status.REJECTED and REFERENCE_TAMPERING in result.flags, result.message
    assert name in result.message


@pytest.mark.gpu
def test_slowing_the_reference_from_outside_it_is_caught_by_its_time(gpu_config):
    """Nothing of the reference changes; a spinning thread competes with it, never with ModelNew. (On a CPU
    the reference's time moves too much with the machine's load to tell: kbench compares it on a GPU.)"""
    result = evaluate(CONVT, CHEATS / "slow_reference_thread.py", gpu_config)
    assert result.status == Status.REJECTED and SLOWED_REFERENCE in result.flags, result.message


@pytest.mark.gpu
def test_a_thread_that_slows_a_gpu_bound_reference_is_named_by_the_cpu_it_uses(gpu_config):
    """On a reference of one long kernel the same spinning thread delays its launch by a few milliseconds, which
    can be under the 2x the time's own rule needs; the CPU the thread uses while the reference runs names it
    whatever the ratio."""
    result = evaluate(CONVT_LARGE, CHEATS / "slow_reference_thread.py", gpu_config)
    assert result.status == Status.REJECTED and SLOWED_REFERENCE in result.flags, result.message
    assert "other threads of the process used" in result.message, result.message


@pytest.mark.gpu
@pytest.mark.parametrize("problem", [CONVT, CONVT_LARGE])
def test_a_helper_thread_that_works_inside_the_candidate_s_calls_only_is_no_slowed_reference(gpu_config, problem):
    result = evaluate(problem, CHEATS / "honest_helper_thread.py", gpu_config)
    assert result.status == Status.CORRECT and SLOWED_REFERENCE not in result.flags, result.message
    assert result.reference_alone and result.reference_alone.others_cpu_ms, "the alone timing records other threads"


def test_a_change_that_hides_sweep_failures_is_tampering(config):
    """Right at the official sizes, wrong at the sweep's, with the reference made to agree each time."""
    result = evaluate(CONVT, CHEATS / "answer_through_reference_sweep.py", replace(config, sweep=4))
    assert result.status == Status.REJECTED and REFERENCE_TAMPERING in result.flags, result.message
    assert "while sweeping ModelNew: Model.forward" in result.message


def test_a_memo_keyed_by_sampled_contents_gains_nothing(config):
    """Every timed call gets contents the candidate has never seen, so the memo never hits: the memo is
    timed doing the honest loop's work (with fixed input sets rotating, it hit on every timed call and
    timed as a copy)."""
    memo = evaluate(CONVT, CHEATS / "memo_contents_cpp.py", config)
    honest = evaluate(CONVT, CHEATS / "honest_cpp.py", config)
    assert memo.status == honest.status == Status.CORRECT, (memo.message, honest.message)
    assert memo.candidate_timing.median_ms > 0.5 * honest.candidate_timing.median_ms, \
        (memo.candidate_timing.median_ms, honest.candidate_timing.median_ms)


def test_reference_outputs_out_of_reach_leave_the_gc_cheat_no_gain(config):
    result = evaluate(CONVT, CHEATS / "gc_reference_output.py", config)
    assert result.status != Status.CORRECT or result.speedup < 1, (result.status, result.speedup)


# --- on a GPU ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_config(gpu_cache_dir) -> RunConfig:
    return RunConfig(device="cuda", cache_dir=gpu_cache_dir, time_budget_s=2.0, sweep=0)


@pytest.mark.gpu
@pytest.mark.parametrize("solution, problem", [
    ("honest_fast_cuda.py", CHAIN), ("l2_persist_cuda.py", ROW_SUM), ("honest_cuda_kernel.py", CONVT),
    ("honest_two_streams.py", AXPY),
])
def test_gpu_solutions_that_are_correct_today(gpu_config, solution, problem):
    """l2_persist_cuda is a cheat, but on speed only: timing.PersistingL2 takes its advantage away
    (test_l2_release.py measures that); its outputs are right."""
    result = judged(gpu_config, CHEATS / solution, problem)
    assert result.status == Status.CORRECT, result.message
    assert not rejecting(result.flags), result.message
    if solution == "honest_fast_cuda.py":
        assert result.speedup > 1.5, result.speedup


@pytest.mark.gpu
@pytest.mark.parametrize("solution, problem", [
    ("honest_fast_cuda.py", CHAIN), ("honest_cuda_kernel.py", CONVT), ("honest_two_streams.py", AXPY),
])
def test_gpu_solutions_with_kernels_of_their_own_are_not_library_only(gpu_config, solution, problem):
    result = judged(gpu_config, CHEATS / solution, problem)
    assert result.status == Status.CORRECT and LIBRARY_ONLY not in result.flags, result.message


@pytest.mark.gpu
def test_a_decoy_kernel_is_library_only(gpu_config):
    result = judged(gpu_config, CHEATS / "decoy_cuda.py", CONVT)
    assert result.status == Status.CORRECT and LIBRARY_ONLY in result.flags, result.message
    assert "no GPU kernel of its own" in result.message


@pytest.mark.gpu
def test_a_memo_keyed_by_sampled_contents_gains_nothing_on_a_gpu(gpu_config):
    memo = judged(gpu_config, CHEATS / "memo_contents_cuda.py", CONVT)
    honest = judged(gpu_config, CHEATS / "honest_cuda_kernel.py", CONVT)
    assert memo.status == honest.status == Status.CORRECT, (memo.message, honest.message)
    assert memo.candidate_timing.median_ms > 0.5 * honest.candidate_timing.median_ms, \
        (memo.candidate_timing.median_ms, honest.candidate_timing.median_ms)


@pytest.mark.gpu
@pytest.mark.parametrize("solution, problem, status, flag", [
    ("slow_reference.py", CONVT, Status.REJECTED, REFERENCE_TAMPERING),
    ("slow_reference_global.py", CONVT, Status.REJECTED, REFERENCE_TAMPERING),
    ("slow_reference_weights.py", CONVT, Status.REJECTED, REFERENCE_TAMPERING),
    ("answer_through_reference.py", CONVT, Status.REJECTED, REFERENCE_TAMPERING),
    ("answer_through_reference_timed.py", CONVT, Status.REJECTED, REFERENCE_TAMPERING),
])
def test_gpu_cheats_are_caught(gpu_config, solution, problem, status, flag):
    result = judged(gpu_config, CHEATS / solution, problem)
    assert result.status == status and flag in result.flags, result.message


@pytest.mark.gpu
def test_a_change_that_hides_sweep_failures_is_tampering_on_a_gpu(gpu_config):
    result = evaluate(CONVT, CHEATS / "answer_through_reference_sweep.py", replace(gpu_config, sweep=4))
    assert result.status == Status.REJECTED and REFERENCE_TAMPERING in result.flags, result.message
    assert "while sweeping ModelNew: Model.forward" in result.message
