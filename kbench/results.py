"""Result records: Identity (what was judged), Outcome (what was found), Result (both, one row of the results)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from kbench import flags as flag_names, stats


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

    # What a finished evaluation says; --resume counts a pair recorded with one of these as done (an
    # infra_error said nothing about the candidate, so it is not final).
    FINAL = (CORRECT, INCORRECT, LOAD_ERROR, COMPILE_ERROR, RUNTIME_ERROR, CRASHED, TIMEOUT,
             SKIPPED, REJECTED, REFERENCE_ERROR)


@dataclass(frozen=True)
class CheckResult:
    trials_passed: int                  # trials whose outputs matched
    trials_total: int                   # trials run
    max_abs_err: float | None = None    # largest |out - ref| over all trials and outputs
    max_rel_err: float | None = None    # largest |out - ref| / |ref| where |ref| >= atol
    norm_err: float | None = None       # largest ||out - ref|| / ||ref|| over trials
    first_mismatch: str | None = None   # where the first failing trial went wrong, readable
    truth_trials: int = 0               # trials that failed against the float32 reference and that the float64
                                        # truth passed (the reference evaluated in float64 decided)
    truth_candidate_err: float | None = None  # in those trials: largest |candidate - float64 truth|
    truth_reference_err: float | None = None  # and largest |float32 reference - float64 truth|

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
    timer: str                          # "judge-clock" (older results: "cuda-events", "cuda-graph", "host-clock")
    others_cpu_ms: tuple[float, ...] = ()  # per sample: CPU ms the worker's other threads used during the call

    @property
    def others_cpu_median_ms(self) -> float | None:
        return stats.median(self.others_cpu_ms) if self.others_cpu_ms else None

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
class Identity:
    """What was judged, under which settings: set once, by the parent, before the worker starts."""

    problem: str                           # problem name (file stem)
    solution: str                          # solution path as given
    solution_hash: str = ""                # sha256 of the solution file, first 16 hex digits
    problem_path: str = ""
    problem_hash: str = ""                 # sha256 of the problem file, first 16 hex digits
    settings: str = ""                     # RunConfig.fingerprint(): runs with equal settings compare
    policy: str = ""                       # precision policy of check and timing
    precision: str = ""                    # dtype inputs and models were cast to (RunConfig.precision)
    device: str = ""                       # "cpu" or "cuda:0" (a Ray row adds "@node")
    log_path: str = ""                     # full output of the worker, build log included
    run_id: str = ""                       # groups the rows of one kbench invocation


@dataclass(frozen=True)
class Outcome:
    """What the evaluation found: filled by the worker (or, for a worker that died, by the parent)."""

    status: str                            # one of Status
    message: str = ""                      # one line: why, for anything but correct
    check: CheckResult | None = None       # None when the candidate never ran
    reference_timing: Timing | None = None
    candidate_timing: Timing | None = None
    baselines: tuple[tuple[str, Timing], ...] = ()  # other reference timings: ("default", ...), ("compile", ...)
    reference_alone: Timing | None = None  # the reference timed before the candidate was imported (GPU, guards)
    sweep: SweepResult | None = None       # random parameter sweep (None: not run)
    clocks: ClockRecord | None = None      # GPU clock and temperature while timing (None: not timed on a GPU)
    flags: tuple[str, ...] = ()            # guards that fired (see flags.py)
    build_s: float | None = None           # seconds spent in extension builds (None: no extension)
    build_reused: bool | None = None       # True when every extension came from the build cache
    device_name: str = ""                  # e.g. "NVIDIA H200"
    torch_version: str = ""
    cuda_version: str = ""
    sizes: str = ""                        # global overrides used, e.g. "length=512", empty = official
    cpu_s: float | None = None             # CPU time of the worker and the compilers it ran (None: it died)
    phase_s: str = ""                      # seconds per worker phase: "loading solution 0.41; checking 1.20; ..."

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Outcome":
        return cls(**_outcome_fields(data))


@dataclass(frozen=True)
class Result:
    """One row of the results: an Identity (what was judged), an Outcome (what was found), when it was recorded
    and how long it took. Every field of the two reads through: `result.status` is `result.outcome.status`."""

    identity: Identity
    outcome: Outcome
    time: str = ""                         # when the result was recorded (ISO 8601, UTC)
    wall_s: float | None = None            # wall time of the whole evaluation, as the parent saw it

    @classmethod
    def of(cls, identity: Identity, outcome: Outcome, *, time: str = "", wall_s: float | None = None) -> "Result":
        return cls(identity, outcome, time, wall_s)

    @classmethod
    def from_fields(cls, *, time: str = "", wall_s: float | None = None, **named) -> "Result":
        """A result from fields by name, each to its record (Identity's or Outcome's): a row made by hand."""
        identity_names = {f.name for f in fields(Identity)}
        unknown = set(named) - identity_names - {f.name for f in fields(Outcome)}
        if unknown:
            raise TypeError(f"Result has no field(s) {sorted(unknown)}")
        return cls(Identity(**{name: value for name, value in named.items() if name in identity_names}),
                   Outcome(**{name: value for name, value in named.items() if name not in identity_names}),
                   time, wall_s)

    def with_outcome(self, **changes) -> "Result":
        """The same row with some of the outcome's fields changed."""
        return replace(self, outcome=replace(self.outcome, **changes))

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
    def reward(self) -> float:
        """One number for a training loop: the judge's speedup (the reference's median time over the candidate's,
        both timed by the judge's protocol) when the verdict is `correct`, 1.0 for a correct result not timed, and
        0.0 for every other verdict. It follows the verdict alone: rejecting flags make the verdict `rejected`,
        noting flags leave it `correct` (under --strict they make it `incorrect`), and warnings about the
        measurement (`unverified_time`, `noisy_timing`, `throttled`) never change it."""
        if self.status != Status.CORRECT or any(name in flag_names.REJECTING for name in self.flags):
            return 0.0
        speedup = self.speedup
        return 1.0 if speedup is None else speedup

    @property
    def ok(self) -> bool:
        return self.status == Status.CORRECT

    def to_dict(self) -> dict:
        """One flat record: the identity's fields, the outcome's, time and wall_s."""
        return {**asdict(self.identity), **asdict(self.outcome), "time": self.time, "wall_s": self.wall_s}

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        identity = Identity(**{f.name: data[f.name] for f in fields(Identity) if f.name in data})
        return cls(identity, Outcome.from_dict(data), data.get("time") or "", data.get("wall_s"))

    def to_row(self) -> dict:
        """Flat CSV row: empty cells (not sentinel numbers) where a value does not exist."""
        return {"time": self.time, "run_id": self.run_id, "problem": self.problem, "solution": self.solution,
                "solution_hash": self.solution_hash, "problem_hash": self.problem_hash, "settings": self.settings,
                "status": self.status, "flags": ";".join(self.flags), **self._check_columns(),
                **self._timing_columns(), **self._sweep_columns(), "timer": self.candidate_timing.timer
                if self.candidate_timing else None, "policy": self.policy, "precision": self.precision,
                **asdict(self.clocks or ClockRecord()), "sizes": self.sizes, "build_s": self.build_s,
                "build_reused": self.build_reused, "wall_s": self.wall_s, "cpu_s": self.cpu_s,
                "phase_s": self.phase_s, "device": self.device, "device_name": self.device_name,
                "torch_version": self.torch_version, "cuda_version": self.cuda_version, "message": self.message,
                "log_path": self.log_path, "problem_path": self.problem_path,
                "ref_samples_ms": list(self.reference_timing.samples_ms) if self.reference_timing else None,
                "cand_samples_ms": list(self.candidate_timing.samples_ms) if self.candidate_timing else None}

    def _check_columns(self) -> dict:
        names = ("trials_passed", "trials_total", "max_abs_err", "max_rel_err", "norm_err", "first_mismatch",
                 "truth_trials", "truth_candidate_err", "truth_reference_err")
        return {name: getattr(self.check, name) if self.check else None for name in names}

    def _timing_columns(self) -> dict:
        columns = {}
        for prefix, timing in (("ref", self.reference_timing), ("cand", self.candidate_timing)):
            columns.update({f"{prefix}_median_ms": timing.median_ms if timing else None,
                            f"{prefix}_iqr_ms": timing.iqr_ms if timing else None,
                            f"{prefix}_samples": timing.count if timing else None})
        columns["speedup"] = self.speedup
        columns["reward"] = self.reward
        alone, during = self.reference_alone, self.reference_timing
        columns["ref_alone_median_ms"] = alone.median_ms if alone else None
        columns["ref_alone_others_cpu_ms"] = alone.others_cpu_median_ms if alone else None
        columns["ref_others_cpu_ms"] = during.others_cpu_median_ms if alone and during else None
        for name in ("default", "compile"):
            columns.update({f"{name}_median_ms": self.baseline_median_ms(name),
                            f"speedup_{name}": self.baseline_speedup(name)})
        return columns

    def _sweep_columns(self) -> dict:
        sweep = self.sweep
        return {"sweep_passed": sweep.passed if sweep else None, "sweep_run": sweep.run if sweep else None,
                "sweep_skipped": sweep.skipped if sweep else None,
                "sweep_failure": sweep.first_failure if sweep else None}


def _read_through(part: str, name: str) -> property:
    return property(lambda result: getattr(getattr(result, part), name), doc=f"{part}.{name}")


for _part, _record in (("identity", Identity), ("outcome", Outcome)):
    for _field in fields(_record):
        setattr(Result, _field.name, _read_through(_part, _field.name))


def _timing(data: dict) -> Timing:
    return Timing(samples_ms=tuple(data["samples_ms"]), timer=data["timer"],
                  others_cpu_ms=tuple(data.get("others_cpu_ms") or ()))


def _outcome_fields(data: dict) -> dict:
    """Outcome's keyword arguments from its JSON form (or a Result's): nested records rebuilt, other keys
    dropped (the identity's, or rows written by other versions)."""
    data = {name: value for name, value in data.items() if name in {f.name for f in fields(Outcome)}}
    for key, record in (("check", CheckResult), ("sweep", SweepResult), ("clocks", ClockRecord)):
        if data.get(key) is not None:
            data[key] = record(**data[key])
    for key in ("reference_timing", "candidate_timing", "reference_alone"):
        if data.get(key) is not None:
            data[key] = _timing(data[key])
    data["baselines"] = tuple((name, _timing(timing)) for name, timing in data.get("baselines") or ())
    data["flags"] = tuple(data.get("flags") or ())
    return data
