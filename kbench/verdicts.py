"""The judge's verdict rules in one place: how an official verdict, a sweep and the flags make the recorded
outcome, what a lost sweep configuration does, and the timing rules that reject. Torch-free: the parent
applies the same rules to a judge that died mid-sweep (runner.lost_worker_outcome)."""

from __future__ import annotations

from dataclasses import replace

from kbench import flags, stats
from kbench.results import Outcome, Status, SweepResult, Timing

# The runner's time for the candidate's call, beside the judge's wall time around the same call: the wall
# time may exceed the runner's time by the protocol's own cost (a stand-in's, timed in the same loop before the
# candidate is imported) plus a margin: the largest of UNCLOCKED_MIN_MS (UNCLOCKED_MIN_MS_CPU on a CPU device),
# UNCLOCKED_FRACTION of the candidate's time, UNCLOCKED_PROTOCOL_FRACTION of the protocol's cost and twice the
# stand-in's own spread below its median (the host's noise). Beyond it, the candidate did work its timer did
# not see; the margin is all such work can gain. Both sides are read at a low quantile (GAP_QUANTILE): a busy
# host only ever adds to a call's gap, while work hidden in every call raises even its smallest gaps.
UNCLOCKED_MIN_MS = 0.1
UNCLOCKED_MIN_MS_CPU = 0.5   # a CPU device: the host's own noise is the candidate's time, and larger
UNCLOCKED_FRACTION = 0.10
UNCLOCKED_PROTOCOL_FRACTION = 0.10
GAP_QUANTILE = 0.2
# A time the runner claims longer than the judge's wall time around it, by more than this, is impossible.
CLAIM_SLACK_MS = 0.02


def final_outcome(official: Outcome, sweep: SweepResult | None, strict: bool) -> Outcome:
    """The verdict to record: a failed sweep adds its noting flag and reason to the official verdict;
    noting flags fail a correct result only under --strict."""
    outcome = replace(official, sweep=sweep)
    if sweep is not None and sweep.first_failure:
        reason = f"sweep failed at {sweep.first_failure}"
        outcome = replace(outcome, flags=tuple(dict.fromkeys(outcome.flags + (flags.SWEEP_FAILED,))),
                          message="; ".join(filter(None, [outcome.message, reason])))
    if strict and outcome.status == Status.CORRECT and any(name in flags.NOTING for name in outcome.flags):
        outcome = replace(outcome, status=Status.INCORRECT)
    return outcome


def sweep_lost(official: Outcome, progress, what: str, strict: bool) -> Outcome:
    """The official verdict stands; the sweep configuration being run (progress: job.ProgressRecord) counts as
    run and failed with `what`."""
    counts = progress.sweep
    sweep = SweepResult(passed=counts.passed, run=counts.run + 1, skipped=counts.skipped,
                        first_failure=f"{progress.current or 'after the sweep'}: {what}")
    return final_outcome(official, sweep, strict)


def timing_mismatch(candidate_ms: list[float], candidate_wall_ms: list[float],
                    calibration_ms: list[float], calibration_wall_ms: list[float],
                    floor_ms: float = UNCLOCKED_MIN_MS) -> str | None:
    """Why the runner's times for the candidate's calls do not agree with the judge's clock, or None.

    The judge's wall time around a call covers the runner's timed region plus the protocol's cost (the
    request, the output's copy into the judge's arenas, the reply), which the stand-in measured before the
    candidate was imported. A candidate whose timer is shorter than what the judge saw by more than that cost
    and the margin did work outside it (after the clock stopped, on another stream, or in a lazy output), or
    lied about its time."""
    if not candidate_ms:
        return None
    impossible = [(ms, wall) for ms, wall in zip(candidate_ms, candidate_wall_ms) if ms > wall + CLAIM_SLACK_MS]
    if impossible:
        ms, wall = impossible[0]
        return f"the runner claimed {ms:.3g} ms for a call the judge saw take {wall:.3g} ms"
    gaps = [wall - ms for ms, wall in zip(calibration_ms, calibration_wall_ms)] or [0.0]
    protocol = low_quantile(gaps)
    timed = stats.median(candidate_ms)
    unclocked = low_quantile([wall - ms for ms, wall in zip(candidate_ms, candidate_wall_ms)]) - protocol
    margin = max(floor_ms, UNCLOCKED_FRACTION * timed, UNCLOCKED_PROTOCOL_FRACTION * protocol,
                 2 * (stats.median(gaps) - protocol))
    if unclocked > margin:
        return (f"work outside the candidate's timer: the judge saw each call take {unclocked:.3g} ms more than "
                f"the {timed:.3g} ms it reported (beyond the protocol's own {protocol:.3g} ms; margin "
                f"{margin:.3g} ms)")
    return None


def low_quantile(values: list[float]) -> float:
    """The GAP_QUANTILE quantile (the smallest value of fewer than 1 / GAP_QUANTILE)."""
    ordered = sorted(values)
    return ordered[int(GAP_QUANTILE * (len(ordered) - 1))]


def slowed_reference_message(alone: Timing, during: Timing) -> str | None:
    """Why the reference timed beside the candidate (`during`) looks slowed, next to its time alone before the
    candidate was imported (GPU work the runner left queued, say); None when it does not."""
    ratio = stats.slowdown(alone.samples_ms, during.samples_ms)
    if ratio is None:
        return None
    return (f"the reference ran {ratio:.1f}x slower once the candidate was loaded (median "
            f"{during.median_ms:.3g} ms against {alone.median_ms:.3g} ms before it was imported)")


def note_slowed_reference(alone: Timing, during: Timing, findings) -> None:
    """Rejecting flag when the reference ran slower beside the candidate than alone before it was imported."""
    message = slowed_reference_message(alone, during)
    if message:
        findings.flag(flags.SLOWED_REFERENCE, message)
        findings.raise_if_rejected()
