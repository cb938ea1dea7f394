"""The timing loop's bound on the judge's fixed cost per batch (kbench/judge/measure.py): a batch of real calls
costs the fixed cost and more, so a fixed cost that a busy moment of its calibration inflated past a whole batch
is bounded by the fastest batch, and the times that took it are flagged. Real timers and samples, made up walls."""

from __future__ import annotations

import torch

from kbench import flags
from kbench.config import RunConfig
from kbench.judge import timing
from kbench.judge.measure import _fixed_cost_bounded
from kbench.judge.progress import Context, Findings, Progress
from kbench.judge.sides import BatchTimer


def _context(tmp_path) -> Context:
    progress = Progress(tmp_path / "progress.json")
    return Context(RunConfig(device="cpu"), torch.device("cpu"), progress, Findings(progress))


def _side(fixed_ms: float, count: int) -> timing.Side:
    return timing.Side(lambda: None, timer=BatchTimer(timing.do_nothing, count, fixed_ms))


def _samples(walls: list[float], fixed_ms: float, count: int) -> timing.Samples:
    return timing.Samples(ms=[max(wall - fixed_ms, 0.0) / count for wall in walls], wall_ms=list(walls))


def test_a_fixed_cost_within_every_batch_changes_nothing(tmp_path):
    context = _context(tmp_path)
    sides = {"candidate": _side(1.0, 10), "reference": _side(1.0, 10)}
    samples = {"candidate": _samples([2.0, 2.2, 2.1], 1.0, 10), "reference": _samples([3.0, 3.1, 2.9], 1.0, 10)}
    assert _fixed_cost_bounded(samples, sides, 1.0, context) is samples
    assert context.findings.flags == []


def test_a_fixed_cost_past_a_whole_batch_is_bounded_by_the_fastest_and_flagged(tmp_path):
    """Calibrated at 5 ms on a busy moment, batches of 10 calls that took 3.4-3.9 ms would all read 0 ms."""
    context = _context(tmp_path)
    sides = {"candidate": _side(5.0, 10), "reference": _side(5.0, 10), "compile": _side(0.0, 10)}
    samples = {"candidate": _samples([3.6, 3.5, 3.9], 5.0, 10), "reference": _samples([3.4, 3.8, 3.7], 5.0, 10),
               "compile": _samples([2.0, 2.0, 2.0], 0.0, 10)}
    assert samples["candidate"].ms == [0.0, 0.0, 0.0]
    bounded = _fixed_cost_bounded(samples, sides, 5.0, context)
    assert bounded["candidate"].ms == [(wall - 3.4) / 10 for wall in (3.6, 3.5, 3.9)]
    assert bounded["reference"].ms == [(wall - 3.4) / 10 for wall in (3.4, 3.8, 3.7)]
    assert bounded["compile"] is samples["compile"]  # timed with no fixed cost (the judge's own): left alone
    assert context.findings.flags == [flags.NOISY_TIMING]
    assert "read more than a whole batch" in context.findings.flag_messages[0]


def test_the_resolution_is_the_runner_s_share_of_the_fixed_cost_not_the_judge_s_copies():
    """A gain is unverified only within what a runner's handling of a batch could shift (verdicts.unverified_gain).
    The judge's own copy of one slot is in the fixed cost but no runner makes it cheaper: for outputs of gigabytes it
    was 3.0 of 3.2 ms per batch of one call (an H200), which read every gain under 47% of a 6.8 ms call as unverified."""
    from kbench.judge.sides import BatchPlan

    large = BatchPlan(count=1, overhead_ms=3.24, copy_ms=0.0, estimate_ms=6.8, slot_copy_ms=3.0, handling_ms=0.15)
    assert abs(large.resolution_ms - 0.24) < 1e-9
    copies_only = BatchPlan(count=4, overhead_ms=0.7, copy_ms=0.0, estimate_ms=1.0, slot_copy_ms=0.68,
                            handling_ms=0.2)
    assert copies_only.resolution_ms == 0.2 / 4  # never below a batch of no calls
    unmeasured = BatchPlan(count=10, overhead_ms=0.5, copy_ms=0.0, estimate_ms=1.0)
    assert unmeasured.resolution_ms == 0.5 / 10  # the whole fixed cost where its parts were not measured
    slow_handling = BatchPlan(count=2, overhead_ms=0.5, copy_ms=0.0, estimate_ms=1.0, slot_copy_ms=0.4,
                              handling_ms=0.9)
    assert slow_handling.resolution_ms == 0.5 / 2  # and never above the whole fixed cost


def test_the_judge_s_copy_of_every_slot_is_in_the_fixed_cost_the_first_one_included():
    """fixed_cost's intercept holds what a batch does once; the judge's copy of each slot is in the batches' slope
    (a batch of n kept calls copies n slots), so the fixed cost per batch counts it for every call of the batch: left
    out for the first, each call carried a share of one slot's copy (relu_large, outputs of 1 GB, read 0.91 ms per
    call against 0.50 ms of kernels on an H200). Only the copy's launch, in the intercept, is left out of the
    resolution."""
    from kbench.judge.sides import BatchPlan

    plan = BatchPlan(count=4, overhead_ms=0.5, copy_ms=0.3, estimate_ms=2.0, slot_copy_ms=0.35, handling_ms=0.1)
    assert abs(plan.fixed_ms - (0.5 + 4 * 0.3)) < 1e-9
    assert abs(plan.resolution_ms - (0.5 - 0.05) / 4) < 1e-9
