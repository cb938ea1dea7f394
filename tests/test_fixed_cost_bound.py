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
from kbench.judge.timed_sides import BatchTimer


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
