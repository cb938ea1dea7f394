"""What a worker knows about its evaluation so far: its phase (mirrored to the progress file the parent
reads when the worker dies or hangs) and the guards' findings (flags and notes)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from kbench import flags
from kbench.config import RunConfig
from kbench.failures import SWEEPING, Evidence, Kind, Party, Stop
from kbench.judge.timing import MIN_SAMPLES_ALWAYS
from kbench.schedule.job import ProgressRecord, SweepCounts
from kbench.problem import describe_overrides
from kbench.results import CheckResult, Outcome
from kbench.runner.wire import BuildInfo
from kbench.verdicts import decide

if TYPE_CHECKING:  # for the annotations only: nothing of these is needed at run time, torch least of all
    import torch

    from kbench.judge.quiet import QuietGpu
    from kbench.judge.remote_process import RunnerProcess


class Progress:
    """The phase the worker is in, with seconds per phase, written to the progress file on every change."""

    def __init__(self, path: Path):
        self.path = path
        self.record = ProgressRecord()
        self.phase_started = time.monotonic()
        self.phase_seconds: dict[str, float] = {}
        self._provisional: tuple[Outcome | None, dict | None] = (None, None)  # the record's, and its dict

    def enter(self, phase: str, current: str = "") -> None:
        if phase != self.record.phase:
            now = time.monotonic()
            self.phase_seconds[self.record.phase] = self.seconds_in(self.record.phase, now)
            self.phase_started = now
        self.update(phase=phase, current=current)

    def update(self, **fields) -> None:
        """Change fields of the record (flags, provisional, sweep, ...) and save it."""
        self.record = replace(self.record, **fields)
        self._save()

    def limit_run(self, reference_call_s: float, config: RunConfig) -> None:
        """Write the run limit derived from the reference's call time into the record, for the parent to enforce
        from now (unless --timeout set one)."""
        if config.timeout_s is None:
            limit_s, basis = derived_run_limit(reference_call_s, config)
            self.update(run_limit_s=limit_s, run_limit_basis=basis)

    def sweep_step(self, counts: SweepCounts, configuration: str) -> None:
        self.record = replace(self.record, sweep=counts)
        self.enter(SWEEPING, configuration)

    def add_seconds(self, name: str, seconds: float) -> None:
        """Seconds of work within a phase worth its own entry in phase_s (making fresh inputs, say)."""
        self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + seconds

    @contextmanager
    def spent(self, name: str):
        """Adds the seconds of the `with` block to `name` in phase_s (a guard's cost, say)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add_seconds(name, time.monotonic() - started)

    def seconds_in(self, phase: str, now: float) -> float:
        spent = self.phase_seconds.get(phase, 0.0)
        return spent + (now - self.phase_started if phase == self.record.phase else 0.0)

    def phases(self) -> str:
        """'loading solution 0.41; checking 1.20; ...' (phases under 5 ms left out)."""
        now = time.monotonic()
        names = dict.fromkeys([*self.phase_seconds, self.record.phase])
        return "; ".join(f"{name} {self.seconds_in(name, now):.2f}" for name in names
                         if self.seconds_in(name, now) >= 0.005)

    def _save(self) -> None:
        provisional = self.record.provisional
        if provisional is not self._provisional[0]:  # serialised once: the record is saved at every phase
            self._provisional = (provisional, provisional.to_dict() if provisional is not None else None)
        self.record.save(self.path, provisional=self._provisional[1])


# The run limit where --timeout sets none: an honest candidate up to SLOWER_ALLOWED times slower per call than its
# reference never runs out of it, and a hang ends after RUN_LIMIT_FLOOR_S where the reference is fast.
SLOWER_ALLOWED = 1000
RUN_LIMIT_FLOOR_S = 60.0
RUN_LIMIT_MARGIN_S = 30.0  # loading the solution, building ModelNew, the judge's own checks
GUARD_CALLS = 5            # the candidate's calls beyond the trials, the sweep and the timing rounds (guards)


def candidate_calls(config: RunConfig) -> int:
    """The candidate's calls in one evaluation whose time does not stop at the time budget: the trials, one per sweep
    configuration, and per timing pass (two at most) its warm-up and the samples taken whatever the budget."""
    return config.trials + config.sweep + 2 * (config.warmup + MIN_SAMPLES_ALWAYS + 1) + GUARD_CALLS


def derived_run_limit(reference_call_s: float, config: RunConfig) -> tuple[float, str]:
    """(seconds, how they were derived): SLOWER_ALLOWED x the reference's call time x the candidate's calls, plus
    the timing passes' budgets and a margin; at least RUN_LIMIT_FLOOR_S."""
    calls = candidate_calls(config)
    derived = SLOWER_ALLOWED * reference_call_s * calls + 2 * config.time_budget_s + RUN_LIMIT_MARGIN_S
    if derived <= RUN_LIMIT_FLOOR_S:
        return RUN_LIMIT_FLOOR_S, f"the floor; the reference's call takes {reference_call_s * 1e3:.3g} ms"
    return round(derived, 1), (f"{SLOWER_ALLOWED} x the reference's {reference_call_s * 1e3:.3g} ms x {calls} calls "
                               f"+ {2 * config.time_budget_s + RUN_LIMIT_MARGIN_S:g} s")


def answer_limit(reference_call_s: float, config: RunConfig) -> Callable[[dict], tuple[float, str]] | None:
    """How long the candidate's runner may take to answer a request (remote_process.RunnerProcess.answer_limit):
    --call-timeout, or SLOWER_ALLOWED x the reference's call time for the calls the request asks for, whichever is
    longer. None where --call-timeout is 0. A hang then ends after about --call-timeout, whatever the reference."""
    floor_s = config.call_timeout_s
    if not floor_s:
        return None

    def limit(message: dict) -> tuple[float, str]:
        calls = {"call": 1, "batch": int(message.get("count") or 0)}.get(message.get("op"), 0)
        derived = SLOWER_ALLOWED * reference_call_s * calls
        if derived <= floor_s:
            return floor_s, f"--call-timeout {floor_s:g} s"
        return derived, f"{SLOWER_ALLOWED} x the reference's {reference_call_s * 1e3:.3g} ms x {calls} call(s)"
    return limit


class Findings:
    """Flags the guards raised (each with its message, in order) and notes that are not flags."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.flags: list[str] = []
        self.flag_messages: list[str] = []
        self.notes: list[str] = []  # worth saying, not a flag: a baseline that could not run, say

    def flag(self, name: str, message: str) -> None:
        if name not in self.flags:
            self.flags.append(name)
            self.flag_messages.append(message)
            self.progress.update(flags=tuple(self.flags))

    def add(self, found: list[tuple[str, str]]) -> None:
        for name, message in found:
            self.flag(name, message)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def raise_if_rejected(self) -> None:
        if any(name in flags.REJECTING for name in self.flags):
            raise Stop(Evidence(Party.CANDIDATE, Kind.REJECTING_FLAG, "; ".join(self.flag_messages)))

    @property
    def message(self) -> str:
        return "; ".join(self.flag_messages + self.notes)

    def outcome(self, evidence: Evidence, **fields) -> Outcome:
        """The outcome verdicts.decide gives `evidence`, with the flags found so far."""
        return decide(evidence, flags=tuple(self.flags), **fields)


class Ending(Protocol):
    """The last evaluation on the device, as Context holds it (evaluation.LastEnding, which imports this module):
    whether it is still ending, and a wait until it has ended."""

    @property
    def pending(self) -> bool: ...

    def wait(self) -> None: ...


@dataclass
class Context:
    """What every stage of an evaluation works with."""

    config: RunConfig
    device: torch.device
    progress: Progress
    findings: Findings
    runner: RunnerProcess | None = None            # where the candidate runs
    reference_runner: RunnerProcess | None = None  # where the reference is timed
    check: CheckResult | None = None  # the correctness trials so far (kept in the row of a later failure)
    overrides: dict = field(default_factory=dict)  # global overrides in use (the official sizes' or the CPU's)
    official: Outcome | None = None   # the verdict at the official sizes, once known (a sweep cannot undo it)
    build: BuildInfo = field(default_factory=BuildInfo)  # what the runner says its builds did
    build_folder: Path | None = None  # the solution's extension builds (a build's runner writes there)
    triton_caches: tuple[Path, Path] | None = None  # (the runner's Triton cache, the solution's it started from)
    confined: Callable[[], None] = lambda: None  # waits for the candidate's runner to be confined and warm
    last_ending: Ending | None = None      # the last evaluation on the device, until it has ended
    quiet_gpu: QuietGpu | None = None      # waits out the candidate's queued GPU work (GPU, guards)

    @property
    def sizes(self) -> str:
        """The overrides, described ("" = official sizes)."""
        return describe_overrides(self.overrides)
