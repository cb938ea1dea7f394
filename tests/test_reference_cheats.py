"""End to end: the cheats of DESIGN.md items 9-14 and their honest look-alikes, judged by kbench.

"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbench import flags
from kbench.config import RunConfig
from kbench.flags import LIBRARY_ONLY, REJECTING, SLOWED_REFERENCE
from kbench.results import Status
from kbench.schedule.child import evaluate

from conftest import FIXTURES, PROBLEMS, judged

CHEATS = FIXTURES / "cheats"
CONVT = CHEATS / "problems" / "convt1d_small.py"
CONVT_LARGE = CHEATS / "problems" / "convt1d_large.py"
PREFIX_SUM = CHEATS / "problems" / "prefix_sum.py"
ROW_SUM = CHEATS / "problems" / "row_sum.py"
CHAIN = CHEATS / "problems" / "elementwise_chain.py"
AXPY = PROBLEMS / "axpy.py"


@pytest.fixture(scope="module")
def config(cpu_config) -> RunConfig:
    """CPU evaluation, short timing budget, in the session's cache (its C++ fixtures are built there)."""
    return RunConfig(device="cpu", cache_dir=cpu_config.cache_dir, timeout_s=300, time_budget_s=0.5, min_samples=3,
                     sweep=0)


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
    # A flag about the measurement (the judge's resolution, a throttled GPU) is not about the candidate.
    assert not set(result.flags) - set(flags.MEASUREMENT), result.message
    if solution == "honest_fast.py":
        assert result.speedup > 1


REFERENCE_CHEATS = ["slow_reference.py", "slow_reference_global.py", "slow_reference_weights.py",
                    "answer_through_reference.py", "answer_through_reference_timed.py"]


def no_gain(result) -> bool:
    """Not correct, or correct at no real advantage (the candidates that go for the reference compute with the
    reference's own op: a speedup near 1 is all an honest run of them gets)."""
    return result.status != Status.CORRECT or result.speedup is None or result.speedup < 2


@pytest.mark.parametrize("solution", REFERENCE_CHEATS)
def test_changing_the_reference_in_the_candidate_s_process_gains_nothing(config, solution):
    """The candidate's process holds its own copy of the problem; the judge's reference is out of its reach."""
    result = evaluate(CONVT, CHEATS / solution, config)
    assert no_gain(result), (result.status, result.speedup, result.message)
    if solution.startswith("answer_through"):  # wrong answers: in the trials, or in the timed calls
        assert result.status in (Status.INCORRECT, Status.REJECTED), result.message


@pytest.mark.gpu
@pytest.mark.parametrize("problem", [CONVT, CONVT_LARGE])
def test_a_thread_that_spins_beside_the_reference_gains_nothing(gpu_config, problem):
    """The reference runs in a process of its own: the spinning thread cannot slow it. It slows the candidate's
    own runner, inside the judge's clock."""
    result = evaluate(problem, CHEATS / "slow_reference_thread.py", gpu_config)
    assert no_gain(result) and SLOWED_REFERENCE not in result.flags, (result.status, result.speedup, result.message)
    assert not rejecting(result.flags), result.flags


@pytest.mark.gpu
@pytest.mark.parametrize("problem", [CONVT, CONVT_LARGE])
def test_a_helper_thread_that_works_inside_the_candidate_s_calls_only_is_no_slowed_reference(gpu_config, problem):
    result = evaluate(problem, CHEATS / "honest_helper_thread.py", gpu_config)
    assert result.status == Status.CORRECT and SLOWED_REFERENCE not in result.flags, result.message


def test_a_change_that_hides_sweep_failures_fails_the_sweep(config):
    """Right at the official sizes, wrong at the sweep's, with its own copy of the reference made to agree."""
    from kbench.flags import SWEEP_FAILED
    result = evaluate(CONVT, CHEATS / "answer_through_reference_sweep.py", replace(config, sweep=4))
    assert result.status != Status.CORRECT or SWEEP_FAILED in result.flags, result.message


def test_a_memo_keyed_by_sampled_contents_gains_nothing(config):
    """Every timed call gets contents the candidate has never seen, so the memo never hits: the memo is
    timed doing the honest loop's work (with fixed input sets rotating, it hit on every timed call and
    timed as a copy). Each is compared with the reference timed beside it in the same rounds: two evaluations'
    own times moved apart by 2x under a busy CI machine (the honest loop's calls spread from 0.78 to 1.41 ms). On
    the 2-core machine the memo's speedup read 0.89-1.09 of the honest loop's, and 1.6-3.1 of it with --no-guards
    (contents that repeat, so the memo hits)."""
    memo = evaluate(CONVT, CHEATS / "memo_contents_cpp.py", config)
    honest = evaluate(CONVT, CHEATS / "honest_cpp.py", config)
    assert memo.status == honest.status == Status.CORRECT, (memo.message, honest.message)
    assert memo.speedup < 1.4 * honest.speedup, (memo.speedup, honest.speedup)


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
@pytest.mark.parametrize("solution", REFERENCE_CHEATS)
def test_gpu_reference_cheats_gain_nothing(gpu_config, solution):
    result = judged(gpu_config, CHEATS / solution, CONVT)
    assert no_gain(result), (result.status, result.speedup, result.message)


@pytest.mark.gpu
def test_a_change_that_hides_sweep_failures_fails_the_sweep_on_a_gpu(gpu_config):
    from kbench.flags import SWEEP_FAILED
    result = evaluate(CONVT, CHEATS / "answer_through_reference_sweep.py", replace(gpu_config, sweep=4))
    assert result.status != Status.CORRECT or SWEEP_FAILED in result.flags, result.message
