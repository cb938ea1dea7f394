"""The judge's verdict rules in one place: how an official verdict, a sweep and the flags make the recorded
outcome, what a lost sweep configuration does, and the timing rules that reject. Torch-free: the parent
applies the same rules to a judge that died mid-sweep (runner.lost_worker_outcome)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kbench import flags, stats
from kbench.results import Outcome, Status, SweepResult, Timing

# The runner's time for the candidate's call, beside the judge's wall time around the same call: the wall
# time exceeds the runner's time by the protocol's own cost (the reference's, timed the same way in the same
# rounds). Both sides' gaps are read twice, and the reading that says more counts:
# - At a low quantile (GAP_QUANTILE): a busy host only ever adds to a call's gap, while work hidden in every call
#   raises even its smallest gaps. Beyond the noting margin (the largest of UNCLOCKED_MIN_MS, or
#   UNCLOCKED_MIN_MS_CPU on a CPU device; UNCLOCKED_FRACTION of the candidate's time;
#   UNCLOCKED_PROTOCOL_FRACTION of the protocol's cost; twice the reference's own spread below its median) it is
#   the noting flag `unclocked_time`: the speedup is kept out of trusted figures. Honest kernels were seen up to
#   0.47 ms and 1.8x their own time past the protocol's gap on an H200 (docs/benchmarks.md), so this alone
#   cannot reject. Beyond the rejecting margin (REJECT_MIN_MS, and REJECT_FRACTION of the candidate's time) it is
#   `timing_mismatch`: work hidden outside the timer (after the clock stopped, on another stream, in a lazy
#   output), or a timer that lies; hidden work below it gains at most that margin. That margin does not grow with
#   the reference's spread (the noting margin stops at it): on a busy host that spread reaches milliseconds, and a
#   cheat's hidden work would fit in it.
# - At the median: the recorded time is the median of the runner's, which work hidden in over half the calls
#   moves while the low quantile does not. A busy host moves medians too (an honest fused op on a loaded 2-core
#   host was 1.2-1.5 ms past the reference's median gap), so here both margins also cover twice the reference's
#   spread above its median (up to HIGH_GAP_QUANTILE): on a busy host a timer that lies in most calls but not all
#   gains at most that.
# The noting margin is also the judge's resolution: a gain over the reference smaller than it is not confirmed
# (`unverified_time`, noting).
UNCLOCKED_MIN_MS = 0.1
UNCLOCKED_MIN_MS_CPU = 0.5
UNCLOCKED_FRACTION = 0.10
UNCLOCKED_PROTOCOL_FRACTION = 0.10
REJECT_MIN_MS = 1.0
REJECT_FRACTION = 2.0
GAP_QUANTILE = 0.2
HIGH_GAP_QUANTILE = 0.8
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


@dataclass(frozen=True)
class ClockBound:
    """How far the judge's clock bounds the candidate's times (milliseconds per call)."""

    timed: float        # the candidate's median, by its runner's timer
    protocol: float     # the protocol's own cost: the reference's gap between the judge's clock and its timer
    unclocked: float    # what the judge saw of the candidate's calls beyond its timer and the protocol
    noting: float       # unclocked time below this is noise (the judge's resolution)
    rejecting: float    # unclocked time beyond this is work hidden from the timer, or a lie
    level: str          # where both sides' gaps were read for `protocol` and `unclocked` ("median", ...)

    @property
    def severity(self) -> int:
        """2: beyond the rejecting margin, 1: beyond the noting margin, 0: within it."""
        return 2 if self.unclocked > self.rejecting else 1 if self.unclocked > self.noting else 0

    def describe(self) -> str:
        return (f"candidate {self.timed:.4g} ms by its timer, {self.unclocked:.4g} ms unclocked beyond the "
                f"protocol's {self.protocol:.4g} ms (gaps at their {self.level}; noted from {self.noting:.4g} ms, "
                f"rejected from {self.rejecting:.4g} ms)")


def clock_bound(candidate_ms: list[float], candidate_wall_ms: list[float], reference_ms: list[float],
                reference_wall_ms: list[float], floor_ms: float = UNCLOCKED_MIN_MS) -> ClockBound:
    """The judge's bound on the candidate's times, read at the gaps' low quantile and at their median: whichever
    says more. The protocol's own cost is what the judge saw beyond the reference's timer, timed in the same
    rounds under the same protocol."""
    gaps = [wall - ms for ms, wall in zip(reference_ms, reference_wall_ms)] or [0.0]
    candidate_gaps = [wall - ms for ms, wall in zip(candidate_ms, candidate_wall_ms)] or [0.0]
    protocol, protocol_median = quantile(gaps, GAP_QUANTILE), stats.median(gaps)
    timed = stats.median(candidate_ms)
    below = max(floor_ms, UNCLOCKED_FRACTION * timed, UNCLOCKED_PROTOCOL_FRACTION * protocol,
                2 * (protocol_median - protocol))
    rejecting = max(REJECT_MIN_MS, REJECT_FRACTION * timed)
    low = ClockBound(timed, protocol, quantile(candidate_gaps, GAP_QUANTILE) - protocol, min(rejecting, below),
                     rejecting, f"{GAP_QUANTILE:.0%} quantile")
    around = max(below, 2 * (quantile(gaps, HIGH_GAP_QUANTILE) - protocol_median))
    middle = ClockBound(timed, protocol_median, stats.median(candidate_gaps) - protocol_median, around,
                        max(rejecting, around), "median")
    return max((low, middle), key=lambda bound: (bound.severity, bound.unclocked))


def unclocked_time(candidate_ms: list[float], candidate_wall_ms: list[float],
                   bound: ClockBound) -> tuple[str, str] | None:
    """(flag, why) when the runner's times for the candidate's calls do not agree with the judge's clock (`bound`:
    clock_bound of the same samples): flags.TIMING_MISMATCH (rejecting) or flags.UNCLOCKED_TIME (noting); None
    when they agree."""
    if not candidate_ms:
        return None
    impossible = [(ms, wall) for ms, wall in zip(candidate_ms, candidate_wall_ms) if ms > wall + CLAIM_SLACK_MS]
    if impossible:
        ms, wall = impossible[0]
        return flags.TIMING_MISMATCH, f"the runner claimed {ms:.3g} ms for a call the judge saw take {wall:.3g} ms"
    why = (f"the judge saw each call take {bound.unclocked:.3g} ms more than the {bound.timed:.3g} ms the "
           f"candidate's timer reported, beyond the protocol's own {bound.protocol:.3g} ms, gaps read at their "
           f"{bound.level}")
    if bound.unclocked > bound.rejecting:
        return flags.TIMING_MISMATCH, (f"work outside the candidate's timer: {why} "
                                       f"(rejected from {bound.rejecting:.3g} ms)")
    if bound.unclocked > bound.noting:
        return flags.UNCLOCKED_TIME, f"time outside the candidate's timer: {why} (noted from {bound.noting:.3g} ms)"
    return None


def unverified_gain(bound: ClockBound, reference_median_ms: float) -> tuple[str, str] | None:
    """(flags.UNVERIFIED_TIME, why) when the candidate is faster than the reference by its timer, but not by
    more than the judge's resolution: work that much longer, hidden from the timer, would go unseen, so the
    gain is not confirmed (kept out of trusted figures). Short kernels meet this; so does a timer that lies
    by less than the resolution."""
    if bound.timed >= reference_median_ms or bound.timed + bound.noting < reference_median_ms:
        return None
    return flags.UNVERIFIED_TIME, (f"faster by its timer ({bound.timed:.3g} ms against the reference's "
                                   f"{reference_median_ms:.3g} ms), but within the judge's clock's resolution "
                                   f"({bound.noting:.3g} ms): the gain is not confirmed")


# Either side's interquartile range beyond this share of its median: the machine was too busy for the speedup
# to mean much (a quiet GPU spreads by about 1%).
NOISY_SPREAD = 0.5


def noisy_timing(reference_ms: list[float], candidate_ms: list[float]) -> tuple[str, str] | None:
    """(flags.NOISY_TIMING, why) when the reference's or the candidate's times spread too widely to trust their
    ratio; None otherwise."""
    spreads = {side: stats.iqr(samples) / stats.median(samples)
               for side, samples in (("reference", reference_ms), ("candidate", candidate_ms))
               if len(samples) >= 2 and stats.median(samples) > 0}
    side, spread = max(spreads.items(), key=lambda item: item[1], default=("", 0.0))
    if spread <= NOISY_SPREAD:
        return None
    return flags.NOISY_TIMING, (f"the {side}'s times spread by {spread:.0%} of their median (interquartile range): "
                                "a busy machine; re-run on a quiet one before trusting the speedup")


def quantile(values: list[float], level: float) -> float:
    """The value `level` of the way up the sorted values (no interpolation: one of them)."""
    ordered = sorted(values)
    return ordered[int(level * (len(ordered) - 1))]


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


# How torch's out-of-memory message gives each process's use of the card (read from the driver, not the runner).
_PROCESS_MEMORY = re.compile(r"Process (\d+) has ([\d.]+) (KiB|MiB|GiB) memory in use")
_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def memory_shortage(message: str, candidate_pid: int, reference_pid: int, held: int, total: int) -> str:
    """When the judge ran out of GPU memory (torch's `message`) holding `held` of `total` bytes: what kbench's
    processes held, if the shortage is theirs; "" if it is the candidate's. Where the driver's figures in the
    message name both runners, the candidate's runner is to blame only if it holds more than the reference's
    (which runs the same model); else the judge alone must hold half the card."""
    used = {int(pid): float(amount) * _UNITS[unit] for pid, amount, unit in _PROCESS_MEMORY.findall(message)}
    candidate, reference = used.get(candidate_pid), used.get(reference_pid)
    if candidate is not None and reference is not None:
        if candidate > 1.25 * reference + 2**30:
            return ""
        return (f"its own copies of inputs and outputs held {held / 2**30:.1f} GiB and the reference's runner "
                f"{reference / 2**30:.1f} GiB of the card's {total / 2**30:.1f} GiB (the candidate's runner "
                f"{candidate / 2**30:.1f} GiB)")
    if held < total / 2:
        return ""
    return f"its own copies of inputs and outputs held {held / 2**30:.1f} of the card's {total / 2**30:.1f} GiB"
