"""The judge's verdict rules in one place. `decide` is the one function that turns what the stages of an evaluation
found (failures.Evidence: who failed, what happened, in which phase) into the recorded Outcome: every rule of who is
to blame and which status it is lives there, and nowhere else (the worker's judge, the parent's lost-worker path and
the Ray executor all call it). Beside it, the rules that feed it: the timing flags, the reference slowed beside
the candidate, a shortage of GPU memory that is kbench's own. Torch-free."""

from __future__ import annotations

import re
from dataclasses import replace

from kbench import flags, stats
from kbench.failures import PHASES_BEFORE_THE_CANDIDATE, SWEEPING, Evidence, Kind, Party
from kbench.results import Outcome, Status, SweepResult, Timing

# The candidate's status for each kind of evidence against it.
_CANDIDATE_STATUS = {Kind.PASSED: Status.CORRECT, Kind.BUILT: Status.BUILT, Kind.WRONG_OUTPUT: Status.INCORRECT,
                     Kind.BROKE_PROTOCOL: Status.INCORRECT, Kind.REJECTING_FLAG: Status.REJECTED,
                     Kind.BUILD_FAILED: Status.COMPILE_ERROR, Kind.LOAD_FAILED: Status.LOAD_ERROR,
                     Kind.RAISED: Status.RUNTIME_ERROR, Kind.OUT_OF_MEMORY: Status.RUNTIME_ERROR,
                     Kind.DIED: Status.CRASHED, Kind.SILENT: Status.TIMEOUT, Kind.NEEDS_CUDA: Status.SKIPPED}
_LOST = (Kind.DIED, Kind.SILENT)

# Errors that, on a CPU-only run, mean the candidate needs CUDA rather than that it is wrong.
_NO_CUDA_MESSAGES = ("not compiled with CUDA", "no NVIDIA driver", "CUDA_HOME", "No CUDA GPUs",
                     "Found no NVIDIA", "CUDA driver", "cuda runtime")


def decide(evidence: Evidence, *, official: Outcome | None = None, progress=None, sweep: SweepResult | None = None,
           strict: bool = False, cpu_only: bool = False, reduced_sizes: str = "", **fields) -> Outcome:
    """The outcome to record for `evidence`. `official`: the verdict at the official sizes, once known (a failure
    in the sweep then only ends the sweep, at the configuration `progress` (job.ProgressRecord) was running;
    evidence that nothing failed then ends it with `sweep`). `strict`: noting flags fail a correct result.
    `cpu_only`: a CPU-only run (a candidate's error that says CUDA is missing skips it). `reduced_sizes`: the
    sizes kbench reduced the problem to on a CPU ("" for none), named in a reference_error. `fields`: the rest of
    the Outcome (flags, check, timings, build_s, sizes, ...), as the stages collected them."""
    if evidence.kind is Kind.PASSED:
        if official is not None:
            return final_outcome(official, sweep, strict)
        return final_outcome(Outcome(status=Status.CORRECT, message=evidence.message, **fields), sweep, strict)
    message = evidence.message
    if evidence.kind in _LOST and not evidence.started:
        message = f"{message} (the runner died starting, before any candidate code)"
    if official is not None and _ends_only_the_sweep(evidence):
        return _sweep_lost(official, progress, message, strict)
    status, message = _blamed(evidence, message, cpu_only, reduced_sizes)
    return Outcome(status=status, message=message, **fields)


def _ends_only_the_sweep(evidence: Evidence) -> bool:
    """After the official verdict, a runner that dies or hangs, or an error of the judge's own, ends the sweep at
    the configuration being run; a worker lost whole keeps its provisional verdict only if it was lost sweeping."""
    if evidence.kind in _LOST:
        return evidence.party is not Party.JUDGE or evidence.phase == SWEEPING
    return evidence.party is Party.JUDGE and evidence.kind in (Kind.RAISED, Kind.OUT_OF_MEMORY)


def _blamed(evidence: Evidence, message: str, cpu_only: bool, reduced_sizes: str) -> tuple[str, str]:
    """(status, message) for a failure, by who failed, what happened and in which phase."""
    party, kind, phase = evidence.party, evidence.kind, evidence.phase
    if kind in _LOST:
        # Lost before it started, the reference's runner, the machine's, or anything before the candidate's code
        # existed: never the candidate's crash or hang.
        if not evidence.started or party in (Party.REFERENCE, Party.MACHINE) or phase in PHASES_BEFORE_THE_CANDIDATE:
            return Status.INFRA_ERROR, message
        return (Status.TIMEOUT if kind is Kind.SILENT else Status.CRASHED), message
    if party is Party.MACHINE:
        return Status.INFRA_ERROR, message
    if party is Party.REFERENCE:  # a reference that fails at kbench's reduced CPU sizes may run at the official ones
        hint = f" (at kbench's reduced CPU sizes {reduced_sizes}; try --full-size)" if reduced_sizes else ""
        return Status.REFERENCE_ERROR, message + hint
    if party is Party.JUDGE:
        if kind is Kind.BROKE_RULE:
            return Status.INFRA_ERROR, message
        if kind is Kind.OUT_OF_MEMORY and evidence.held:
            return Status.INFRA_ERROR, (f"kbench ran out of GPU memory while {phase}: {evidence.held}; run it on a "
                                        f"card with more memory")
        # An error of the judge's own: before the candidate was imported nothing of it ran, so the problem failed;
        # after, the candidate may be the cause (it can fill the device's memory, say).
        status = Status.REFERENCE_ERROR if phase in PHASES_BEFORE_THE_CANDIDATE else Status.RUNTIME_ERROR
        return status, f"failed while {phase}: {message}"
    if cpu_only and kind in (Kind.LOAD_FAILED, Kind.BUILD_FAILED, Kind.RAISED, Kind.OUT_OF_MEMORY) \
            and any(text.lower() in message.lower() for text in _NO_CUDA_MESSAGES):
        return Status.SKIPPED, f"needs a CUDA device ({message})"  # not the candidate's fault
    status = _CANDIDATE_STATUS[kind]
    if status == Status.RUNTIME_ERROR and not message.startswith("failed while"):
        message = f"failed while {phase}: {message}"  # its runner does not know the judge's phases
    return status, message


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


def _sweep_lost(official: Outcome, progress, what: str, strict: bool) -> Outcome:
    """The official verdict stands; the sweep configuration being run (progress: job.ProgressRecord) counts as
    run and failed with `what`."""
    counts = progress.sweep
    sweep = SweepResult(passed=counts.passed, run=counts.run + 1, skipped=counts.skipped,
                        first_failure=f"{progress.current or 'after the sweep'}: {what}")
    return final_outcome(official, sweep, strict)


# A gain over the reference no larger than the judge's clock's resolution per call (sides.BatchPlan), where
# that resolution is coarser than this share of the candidate's time, is not confirmed. The batches are sized so
# that it is not coarser (1% of a call, or 1 us): only calls under 0.1 ms, or batches the ring's memory or the time
# budget kept short, meet this...
UNVERIFIED_SHARE = 0.01
# ...and a gain below this share of the reference's time claims nothing worth confirming (the timing's own noise).
UNVERIFIED_MIN_GAIN = 0.02


def unverified_gain(resolution_ms: float, reference_ms: float, candidate_ms: float) -> tuple[str, str] | None:
    """(flags.UNVERIFIED_TIME, why) when the candidate is faster than the reference by more than UNVERIFIED_MIN_GAIN
    but by no more than the judge's clock resolves per call, and that resolution is coarser than UNVERIFIED_SHARE of
    its time: a runner's own handling of a batch could shift its time by as much, so the gain is not confirmed (kept
    out of trusted figures)."""
    if candidate_ms <= 0 < reference_ms:  # every batch within the fixed cost: no time the clock resolved
        return flags.UNVERIFIED_TIME, (f"the candidate's calls read 0 ms once the judge's fixed cost per batch was "
                                       f"subtracted (resolution {resolution_ms:.3g} ms per call): no speedup to give")
    gain = reference_ms - candidate_ms
    if gain <= UNVERIFIED_MIN_GAIN * reference_ms or gain > resolution_ms \
            or resolution_ms <= UNVERIFIED_SHARE * candidate_ms:
        return None
    return flags.UNVERIFIED_TIME, (f"faster ({candidate_ms:.3g} ms against the reference's {reference_ms:.3g} ms) by "
                                   f"no more than the judge's clock resolves per call ({resolution_ms:.3g} ms): "
                                   f"the gain is not confirmed")


# On a CPU: one side's runner got less than this share of the CPU time the other's got per second of its batches
# (another process's load hit one side and not the other)...
UNEVEN_SHARE = 0.7
# ...read only once each side's batches took this long (the kernel counts CPU time in ticks of 10 ms).
UNEVEN_MIN_S = 0.1


def uneven_load(load: dict[str, tuple[float, float]]) -> tuple[str, str] | None:
    """(flags.NOISY_TIMING, why) when, by `load` ({side: (CPU seconds its runner used in its batches, their wall
    seconds)}), one side's runner was on a CPU markedly less of its batches' time than the other's; None otherwise."""
    shares = {side: cpu_s / wall_s for side, (cpu_s, wall_s) in load.items() if wall_s >= UNEVEN_MIN_S}
    if len(shares) < 2 or min(shares.values()) >= UNEVEN_SHARE * max(shares.values()):
        return None
    low = min(shares, key=shares.get)
    return flags.NOISY_TIMING, (f"the {low}'s runner was on a CPU {shares[low]:.0%} of its batches' time, the other "
                                f"side's {max(shares.values()):.0%}: load on the machine hit one side and not the "
                                f"other; re-run on a quiet one before trusting the speedup")


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


def slowed_reference_message(alone: Timing, during: Timing) -> str | None:
    """Why the reference timed beside the candidate (`during`) looks slowed, next to its time alone before the
    candidate was imported (GPU work the runner left queued, say); None when it does not."""
    ratio = stats.slowdown(alone.samples_ms, during.samples_ms)
    if ratio is None:
        return None
    return (f"the reference ran {ratio:.1f}x slower once the candidate was loaded (median "
            f"{during.median_ms:.3g} ms against {alone.median_ms:.3g} ms before it was imported)")


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
