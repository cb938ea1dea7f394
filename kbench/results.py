"""Result records and the results CSV, appended one row at a time as each result exists."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from kbench import stats


class Status:
    """Verdicts. Only CORRECT counts as a pass."""

    CORRECT = "correct"                  # every trial matched the reference
    INCORRECT = "incorrect"              # ran, but some trial did not match (shape, dtype, NaN, values)
    LOAD_ERROR = "load_error"            # file did not import, has no ModelNew, or its constructor failed
    COMPILE_ERROR = "compile_error"      # its extension did not build
    RUNTIME_ERROR = "runtime_error"      # forward raised (including CUDA errors)
    CRASHED = "crashed"                  # the worker process died (signal or abnormal exit)
    TIMEOUT = "timeout"                  # no result within the wall-clock limit (build or run)
    SKIPPED = "skipped"                  # could not be judged here (e.g. needs a CUDA device)
    REJECTED = "rejected"                # output looked right but a guard caught cheating
    REFERENCE_ERROR = "reference_error"  # the problem itself failed: not the candidate's fault
    INFRA_ERROR = "infra_error"          # the infrastructure failed (node or worker lost): not the candidate's fault
    BUILT = "built"                      # build-only runs: imported and built, not yet judged

    # What a finished evaluation says; --resume counts a pair recorded with one of these as done.
    FINAL = (CORRECT, INCORRECT, LOAD_ERROR, COMPILE_ERROR, RUNTIME_ERROR, CRASHED, TIMEOUT,
             SKIPPED, REJECTED, REFERENCE_ERROR)
    # Every status a result row may hold: an infra_error said nothing about the candidate, so it is not final.
    ALL = FINAL + (INFRA_ERROR,)


@dataclass(frozen=True)
class CheckResult:
    trials_passed: int                  # trials whose outputs matched
    trials_total: int                   # trials run
    max_abs_err: float | None = None    # largest |out - ref| over all trials and outputs
    max_rel_err: float | None = None    # largest |out - ref| / |ref| where |ref| >= atol
    norm_err: float | None = None       # largest ||out - ref|| / ||ref|| over trials
    first_mismatch: str | None = None   # where the first failing trial went wrong, readable

    @property
    def passed(self) -> bool:
        return self.trials_total > 0 and self.trials_passed == self.trials_total


@dataclass(frozen=True)
class SweepResult:
    passed: int                         # configurations where the candidate matched
    run: int                            # configurations checked (the reference accepted them)
    skipped: int                        # configurations the reference itself rejected
    first_failure: str | None = None    # reproducible: "stride=2 length=37: <why>"


@dataclass(frozen=True)
class Timing:
    samples_ms: tuple[float, ...]       # raw samples, in the order taken
    timer: str                          # "cuda-events", "cuda-graph" (replays timed by events) or "host-clock"

    @property
    def median_ms(self) -> float:
        return stats.median(self.samples_ms)

    @property
    def iqr_ms(self) -> float:
        return stats.iqr(self.samples_ms)

    @property
    def count(self) -> int:
        return len(self.samples_ms)


@dataclass(frozen=True)
class ClockRecord:
    """The GPU's SM clock and temperature while an evaluation was timed (None: not readable)."""

    sm_mhz_start: float | None = None   # after the warm-up calls, before the first sample
    sm_mhz_end: float | None = None     # after the last sample
    sm_mhz_min: float | None = None     # lowest reading in between (read about every 0.5 s)
    sm_drop: float | None = None        # largest fall from an earlier reading to a later one, fraction
    temperature_c_start: float | None = None
    temperature_c_end: float | None = None

    @classmethod
    def from_readings(cls, readings) -> "ClockRecord":
        """From timing.ClockReading values in the order read."""
        clocks = [reading.sm_mhz for reading in readings if reading.sm_mhz is not None]
        temperatures = [reading.temperature_c for reading in readings if reading.temperature_c is not None]
        return cls(sm_mhz_start=clocks[0] if clocks else None, sm_mhz_end=clocks[-1] if clocks else None,
                   sm_mhz_min=min(clocks) if clocks else None,
                   sm_drop=stats.largest_drop(clocks) if clocks else None,
                   temperature_c_start=temperatures[0] if temperatures else None,
                   temperature_c_end=temperatures[-1] if temperatures else None)


@dataclass(frozen=True)
class Result:
    problem: str                           # problem name (file stem)
    solution: str                          # solution path as given
    status: str                            # one of Status.ALL
    message: str = ""                      # one line: why, for anything but correct
    solution_hash: str = ""                # sha256 of the solution file, first 16 hex digits
    problem_path: str = ""
    problem_hash: str = ""                 # sha256 of the problem file, first 16 hex digits
    settings: str = ""                     # RunConfig.fingerprint(): runs with equal settings compare
    check: CheckResult | None = None       # None when the candidate never ran
    reference_timing: Timing | None = None
    candidate_timing: Timing | None = None
    baselines: tuple[tuple[str, Timing], ...] = ()  # other reference timings: ("default", ...), ("compile", ...)
    sweep: SweepResult | None = None       # random parameter sweep (None: not run)
    clocks: ClockRecord | None = None      # GPU clock and temperature while timing (None: not timed on a GPU)
    flags: tuple[str, ...] = ()            # guards that fired (see guards.py)
    build_s: float | None = None           # seconds spent in extension builds (None: no extension)
    build_reused: bool | None = None       # True when every extension came from the build cache
    log_path: str = ""                     # full output of the worker, build log included
    device: str = ""                       # "cpu" or "cuda:0"
    device_name: str = ""                  # e.g. "NVIDIA H200"
    torch_version: str = ""
    cuda_version: str = ""
    policy: str = ""                       # precision policy of check and timing
    sizes: str = ""                        # global overrides used, e.g. "length=512", empty = official
    wall_s: float | None = None            # wall time of the whole evaluation
    cpu_s: float | None = None             # CPU time of the worker and the compilers it ran (None: it died)
    phase_s: str = ""                      # seconds per worker phase: "loading solution 0.41; checking 1.20; ..."
    time: str = ""                         # when the result was recorded (ISO 8601, UTC)
    run_id: str = ""                       # groups the rows of one kbench invocation

    @property
    def speedup(self) -> float | None:
        if self.reference_timing is None or self.candidate_timing is None:
            return None
        return stats.speedup(self.reference_timing.median_ms, self.candidate_timing.median_ms)

    def baseline_median_ms(self, name: str) -> float | None:
        timing = dict(self.baselines).get(name)
        return timing.median_ms if timing is not None else None

    def baseline_speedup(self, name: str) -> float | None:
        """Speedup against another baseline: its median over the candidate's."""
        if self.candidate_timing is None:
            return None
        return stats.speedup(self.baseline_median_ms(name), self.candidate_timing.median_ms)

    @property
    def ok(self) -> bool:
        return self.status == Status.CORRECT

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        data = dict(data)
        if data.get("check") is not None:
            data["check"] = CheckResult(**data["check"])
        if data.get("sweep") is not None:
            data["sweep"] = SweepResult(**data["sweep"])
        if data.get("clocks") is not None:
            data["clocks"] = ClockRecord(**data["clocks"])
        for key in ("reference_timing", "candidate_timing"):
            if data.get(key) is not None:
                data[key] = Timing(samples_ms=tuple(data[key]["samples_ms"]), timer=data[key]["timer"])
        data["baselines"] = tuple((name, Timing(samples_ms=tuple(timing["samples_ms"]), timer=timing["timer"]))
                                  for name, timing in data.get("baselines") or ())
        data["flags"] = tuple(data.get("flags") or ())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_row(self) -> dict:
        """Flat CSV row: empty cells (not sentinel numbers) where a value does not exist."""
        check = self.check
        ref = self.reference_timing
        cand = self.candidate_timing
        sweep = self.sweep
        clocks = self.clocks or ClockRecord()
        return {
            "time": self.time,
            "run_id": self.run_id,
            "problem": self.problem,
            "solution": self.solution,
            "solution_hash": self.solution_hash,
            "problem_hash": self.problem_hash,
            "settings": self.settings,
            "status": self.status,
            "flags": ";".join(self.flags),
            "trials_passed": check.trials_passed if check else None,
            "trials_total": check.trials_total if check else None,
            "max_abs_err": check.max_abs_err if check else None,
            "max_rel_err": check.max_rel_err if check else None,
            "norm_err": check.norm_err if check else None,
            "first_mismatch": check.first_mismatch if check else None,
            "ref_median_ms": ref.median_ms if ref else None,
            "ref_iqr_ms": ref.iqr_ms if ref else None,
            "ref_samples": ref.count if ref else None,
            "cand_median_ms": cand.median_ms if cand else None,
            "cand_iqr_ms": cand.iqr_ms if cand else None,
            "cand_samples": cand.count if cand else None,
            "speedup": self.speedup,
            "default_median_ms": self.baseline_median_ms("default"),
            "speedup_default": self.baseline_speedup("default"),
            "compile_median_ms": self.baseline_median_ms("compile"),
            "speedup_compile": self.baseline_speedup("compile"),
            "sweep_passed": sweep.passed if sweep else None,
            "sweep_run": sweep.run if sweep else None,
            "sweep_skipped": sweep.skipped if sweep else None,
            "sweep_failure": sweep.first_failure if sweep else None,
            "timer": cand.timer if cand else None,
            "policy": self.policy,
            "sm_mhz_start": clocks.sm_mhz_start,
            "sm_mhz_end": clocks.sm_mhz_end,
            "sm_mhz_min": clocks.sm_mhz_min,
            "sm_drop": clocks.sm_drop,
            "temperature_c_start": clocks.temperature_c_start,
            "temperature_c_end": clocks.temperature_c_end,
            "sizes": self.sizes,
            "build_s": self.build_s,
            "build_reused": self.build_reused,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "phase_s": self.phase_s,
            "device": self.device,
            "device_name": self.device_name,
            "torch_version": self.torch_version,
            "cuda_version": self.cuda_version,
            "message": self.message,
            "log_path": self.log_path,
            "problem_path": self.problem_path,
            "ref_samples_ms": list(ref.samples_ms) if ref else None,
            "cand_samples_ms": list(cand.samples_ms) if cand else None,
        }


CSV_COLUMNS = list(Result(problem="", solution="", status="").to_row())


def append_row(path: Path, row: dict) -> None:
    """Append one row, writing the header first; a file with other columns is rewritten with the union.

    Each append opens, writes and closes the file, so a crash or Ctrl-C leaves a valid CSV.
    Lists (raw timing samples) are stored as JSON text.
    """
    row = {name: json.dumps(value) if isinstance(value, list) else value for name, value in row.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    header = _read_header(path)
    if header is None:
        _write_rows(path, list(row), [row])
    elif header == list(row):
        with path.open("a", newline="") as handle:
            csv.DictWriter(handle, fieldnames=header).writerow(row)
    else:
        with path.open(newline="") as handle:
            existing = list(csv.DictReader(handle))
        union = header + [name for name in row if name not in header]
        _write_rows(path, union, existing + [row])


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _read_header(path: Path) -> list[str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with path.open(newline="") as handle:
        return next(csv.reader(handle), None)


def _write_rows(path: Path, header: list[str], rows: list[dict]) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(temporary, path)
