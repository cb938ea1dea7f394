"""Adversarial fixtures: each way of faking correctness or speed gets its flag; honest kernels get none.

CPU cheats run here end to end; the GPU-only ones (side streams, uninitialised memory) are in
test_gpu.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from kbench import flags
from kbench.judge import guards
from kbench.results import Status
from kbench.schedule.child import evaluate

from conftest import FIXTURES, PROBLEMS
from conftest import judged as judged_once

CHEATS = FIXTURES / "cheats"
AXPY = PROBLEMS / "axpy.py"
CONVT = CHEATS / "problems" / "convt1d_small.py"
NEAR_CONSTANT = CHEATS / "problems" / "near_constant.py"

def judged(config, solution: str, problem):
    return judged_once(config, CHEATS / solution, problem)


@pytest.mark.parametrize("solution, problem, flag", [
    ("memo_pointer.py", AXPY, flags.STALE_OUTPUT),
    ("memo_call_count.py", AXPY, flags.STALE_OUTPUT),
    ("skip_after_warmup.py", CONVT, flags.STALE_OUTPUT),
    ("input_scribble.py", AXPY, flags.MUTATED_INPUTS),
])
def test_cheat_is_rejected_with_its_flag(cpu_config, solution, problem, flag):
    """Memoisers may be caught as early as the trials (the arguments arrive in the same arenas each call)."""
    result = judged(cpu_config, solution, problem)
    if flag == flags.STALE_OUTPUT and result.status == Status.INCORRECT:
        return
    assert result.status == Status.REJECTED, (result.status, result.message)
    assert flag in result.flags
    assert result.message  # says what was caught


@pytest.mark.parametrize("solution, problem, flag", [
    ("library_op.py", CONVT, flags.CALLS_REFERENCE_OP),
    ("fallback_op.py", CONVT, flags.CALLS_REFERENCE_OP),
    ("low_precision.py", CONVT, flags.LOW_PRECISION),
    ("constant_answer.py", NEAR_CONSTANT, flags.WEAK_CHECK),
])
def test_noting_flag_keeps_the_verdict_and_strict_fails_it(cpu_config, solution, problem, flag):
    result = judged(cpu_config, solution, problem)
    assert result.status == Status.CORRECT, result.message
    assert flag in result.flags and not set(result.flags) & set(flags.REJECTING)
    assert result.speedup is not None
    strict = evaluate(problem, CHEATS / solution, replace(cpu_config, strict=True, sweep=0, time=False))
    assert strict.status == Status.INCORRECT and flag in strict.flags


def test_reference_op_note_names_the_op(cpu_config):
    assert "aten.convolution" in judged(cpu_config, "library_op.py", CONVT).message


def test_honest_kernel_gets_no_flags(cpu_config):
    result = judged(cpu_config, "honest_cpp.py", CONVT)
    assert result.status == Status.CORRECT, result.message
    # No flag about the kernel; a measurement flag (noisy_timing on a 2-core machine busy building the C++ fixtures
    # beside the tests) is about the machine, and says so.
    assert set(result.flags) - set(flags.MEASUREMENT) == set(), result.flags
    assert result.sweep.passed == result.sweep.run


def test_guards_off_a_memoiser_by_address_is_still_caught_in_the_trials(cpu_config):
    """The arguments reach the runner in the same arenas every call, so a memo keyed by address hits in the
    second trial, whose inputs differ: caught even with the timing guards off."""
    result = evaluate(AXPY, CHEATS / "memo_pointer.py", replace(cpu_config, guards=False, sweep=0))
    assert result.status == Status.INCORRECT, result.message


def test_a_gain_within_the_judge_s_clock_resolution_is_unverified_only_where_that_resolution_is_coarse():
    from kbench import verdicts
    assert verdicts.unverified_gain(0.001, 1.0, 0.9995) is None  # resolved to 0.1% of a call: a gain is a gain
    assert verdicts.unverified_gain(0.05, 1.0, 1.02) is None  # slower: nothing claimed
    assert verdicts.unverified_gain(0.05, 1.0, 0.9) is None  # a gain larger than the resolution
    assert verdicts.unverified_gain(0.05, 1.0, 0.99) is None  # a gain within the timing's own noise claims nothing
    coarse = verdicts.unverified_gain(0.05, 1.0, 0.97)  # 5% per call (a batch the ring's memory kept short)
    assert coarse and coarse[0] == flags.UNVERIFIED_TIME
    unresolved = verdicts.unverified_gain(0.001, 0.05, 0.0)  # every batch within the fixed cost: no speedup at all
    assert unresolved and unresolved[0] == flags.UNVERIFIED_TIME and "0 ms" in unresolved[1]
    assert verdicts.unverified_gain(0.001, 0.0, 0.0) is None  # neither side timed: nothing claimed


def test_load_that_hits_one_side_and_not_the_other_is_flagged():
    from kbench import verdicts
    assert verdicts.uneven_load({"candidate": (0.19, 0.2), "reference": (0.2, 0.2)}) is None
    assert verdicts.uneven_load({"candidate": (0.1, 0.2), "reference": (0.1, 0.2)}) is None  # both halved: alike
    assert verdicts.uneven_load({"candidate": (0.01, 0.02), "reference": (0.2, 0.2)}) is None  # too short to read
    uneven = verdicts.uneven_load({"candidate": (0.2, 0.2), "reference": (0.2, 0.4)})
    assert uneven and uneven[0] == flags.NOISY_TIMING and "the reference's runner" in uneven[1]


def test_the_float64_truth_is_skipped_only_where_the_low_precision_flag_cannot_fire():
    """guards.low_precision_possible(n) must be True whenever a candidate n away from the float32 reference
    (relative norm) could be flagged: errors drawn at random and aligned (the worst case: the candidate's
    difference from the reference points the same way as the reference's from the truth)."""
    from kbench.judge.check import error_against

    generator = torch.Generator().manual_seed(0)
    skipped = 0
    for trial in range(400):
        truth = torch.randn(256, generator=generator, dtype=torch.float64)
        direction = torch.randn(256, generator=generator, dtype=torch.float64)
        reference_error = 10 ** (-8 + 3 * torch.rand(1, generator=generator).item())
        candidate_error = 10 ** (-8 + 3 * torch.rand(1, generator=generator).item())
        own = direction if trial % 2 else torch.randn(256, generator=generator, dtype=torch.float64)
        reference = truth + reference_error * truth.norm() * direction / direction.norm()
        candidate = reference + candidate_error * reference.norm() * own / own.norm()
        norm_err = ((candidate - reference).norm() / reference.norm()).item()
        against_truth, reference_against_truth = error_against(candidate, truth), error_against(reference, truth)
        flagged = against_truth >= guards.LOW_PRECISION_MIN_ERROR and \
            against_truth >= guards.LOW_PRECISION_RATIO * reference_against_truth
        assert guards.low_precision_possible(norm_err) or not flagged, (norm_err, against_truth)
        skipped += not guards.low_precision_possible(norm_err)
    assert skipped > 100  # the shortcut does skip the truth for accurate candidates
