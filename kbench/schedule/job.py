"""What crosses the boundary between kbench and its worker process (the judge).

Torch-free: the parent (runner, scheduler, Ray executor) imports this module, never the worker's.
- Job: everything one evaluation needs (the parent writes it, the worker reads it).
- ProgressRecord: what the worker is doing now (the worker writes it as it goes; the parent reads it
  when the worker dies or hangs, to say where, and to keep an official verdict a sweep lost).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kbench.config import RunConfig
from kbench.failures import SWEEPING
from kbench.results import Outcome


@dataclass(frozen=True)
class Job:
    """One evaluation, as the worker runs it; a plain value so any executor can carry it."""

    problem_path: str          # reference file, absolute
    solution_path: str         # candidate file, absolute
    device: str                # resolved: "cpu" or "cuda:N"
    config: RunConfig
    result_path: str           # where the worker writes its Outcome as JSON
    progress_path: str         # where the worker keeps its ProgressRecord
    overrides: dict = field(default_factory=dict)  # problem globals to override (empty: official, or small on a CPU)
    log_path: str = ""         # the worker's stdout/stderr file (build output lands there)
    build_only: bool = False   # import the solution (building its extensions) and stop
    wait_for: str = ""         # a file that appears once the last evaluation on the device has ended (LastEnding)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dict(asdict(self), config=self.config.to_dict())))

    @classmethod
    def load(cls, path: Path) -> "Job":
        data = json.loads(Path(path).read_text())
        return cls(**dict(data, config=RunConfig.from_dict(data["config"])))


@dataclass(frozen=True)
class SweepCounts:
    """A parameter sweep so far."""

    passed: int = 0            # configurations where the candidate matched
    run: int = 0               # configurations checked
    skipped: int = 0           # configurations the reference rejected
    total: int = 0             # configurations asked for


@dataclass(frozen=True)
class ProgressRecord:
    """The worker's progress file."""

    phase: str = "starting"             # "loading solution", "checking", "timing", "sweeping", ...
    current: str = ""                   # what within the phase: the sweep configuration being run
    building: str = ""                  # the extension being built now, "name (compiler)" ("" when none)
    build_since: float | None = None    # when that build started (time.time())
    build_s: float | None = None        # seconds spent in builds so far
    flags: tuple[str, ...] = ()         # guards that fired so far
    provisional: Outcome | None = None  # the official verdict, once known (kept if a sweep kills the worker)
    sweep: SweepCounts = SweepCounts()
    runner_sessions: tuple[int, ...] = ()  # the judge's runners' sessions (the parent kills them with the judge)
    run_limit_s: float | None = None    # the run limit the judge derived from the reference's time (the parent
    run_limit_basis: str = ""           # enforces it from when it appears, builds not counted), and how it was

    def save(self, path: Path, provisional: dict | None = None) -> None:
        """`provisional`: this record's provisional outcome as a dict, when the caller has it already (a sweep
        saves the record at every configuration; the outcome, with its timing samples, does not change)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["sweep"] = asdict(self.sweep)
        if provisional is None and self.provisional is not None:
            provisional = self.provisional.to_dict()
        data["provisional"] = provisional
        write_json_atomic(path, data)

    def describe(self, now: float) -> str:
        """What the worker is doing, in a few words: 'building conv_ext (nvcc) 12 s', 'sweep 3/8', 'timing'
        (`now`: time.time())."""
        if self.building:
            return f"building {self.building} {now - (self.build_since or now):.0f} s"
        if self.phase == SWEEPING:
            return f"sweep {min(self.sweep.run + 1, self.sweep.total)}/{self.sweep.total}"
        return self.phase

    @classmethod
    def load(cls, path: Path) -> "ProgressRecord":
        """The last record written; a fresh one when there is none (the worker died before writing)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return cls()
        provisional = data.get("provisional")
        return cls(**dict(data, flags=tuple(data.get("flags") or ()), sweep=SweepCounts(**data.get("sweep") or {}),
                          runner_sessions=tuple(data.get("runner_sessions") or ()),
                          provisional=Outcome.from_dict(provisional) if provisional else None))


def write_json_atomic(path: Path, data: dict) -> None:
    """Readers never see a half-written file."""
    temporary = Path(path).with_suffix(".tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)
