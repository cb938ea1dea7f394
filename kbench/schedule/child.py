"""One evaluation as kbench's process sees it: the result's identity, a job for a worker process, and the
worker's outcome, or a verdict for a worker that died or hung.

`evaluate()` is the library entry point: one problem, one solution, one config -> one Result (its build first,
in a worker of its own, where the cache has none). It never raises for anything the candidate does; the parent
always gets a row to write.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from kbench.config import RunConfig
from kbench.extensions.cache import versions_tag
from kbench.failures import PHASES_BEFORE_THE_CANDIDATE, Evidence, Kind, Party
from kbench.schedule.job import Job, ProgressRecord
from kbench.processes import kill_session, signal_name
from kbench.schedule.pool import worker_pool
from kbench.problem import describe_overrides
from kbench.results import Identity, Outcome, Result, Status
from kbench.solution import Solution
from kbench.verdicts import decide


def resolve_device(requested: str) -> str:
    """'auto' -> 'cuda:0' when CUDA is usable, else 'cpu'; 'cuda' -> 'cuda:0'."""
    import torch

    if requested == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        return "cuda:0"
    return requested


def file_hash(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"


def identify(problem_path: Path, solution_path: Path, config: RunConfig, device: str, run_id: str = "") -> Identity:
    """What a row judges: the files as given, their hashes, the settings, the device."""
    return Identity(problem=problem_path.stem, solution=str(solution_path), solution_hash=file_hash(solution_path),
                    problem_path=str(problem_path), problem_hash=file_hash(problem_path),
                    settings=config.fingerprint(device), policy=config.policy, precision=config.precision,
                    device=device, run_id=run_id)


@dataclass(frozen=True)
class EvaluationOptions:
    """How one evaluation runs, besides what it judges (problem, solution, config): what evaluate() passes on to
    each of its workers."""

    device: str | None = None        # None: the config's device (resolve_device)
    overrides: dict | None = None    # the problem's sizes to run at, in place of its official ones
    run_id: str = ""
    # Only import the solution (building its extensions into the cache) and return status `built`, or the
    # load/compile failure; a later evaluation then starts warm.
    build_only: bool = False
    build_threads: int | None = None  # caps the compiler jobs one build may run (ninja's MAX_JOBS)
    build_nice: int = 0                # lowers the build's CPU priority (and its compilers') by that much
    # Tells the build's compilers where to wait for a compile slot (slots.SlotServer.environment).
    slot_environment: dict | None = None
    # The row's identity when the caller made it (a Ray node records the driver's paths and its own GPU), else
    # made here.
    identity: Identity | None = None
    # Sees the worker's progress record every half second or so while it runs.
    on_progress: Callable[[ProgressRecord], None] | None = None
    # Seconds the build limit does not count (the build's waits for compile slots).
    excused_s: Callable[[], float] = lambda: 0.0
    # Return once the worker has written its outcome, its ending (CUDA teardown) overlapping this process's next
    # evaluation on the device, whose judge waits for it before timing anything; only where every evaluation on
    # the device goes through this process (not on Ray, whose tasks may run in other processes).
    overlap_ending: bool = True
    on_worker_started: Callable[[int], None] = lambda pid: None  # told the worker's pid the moment it exists


def evaluate(problem_path: Path, solution_path: Path, config: RunConfig,
             options: EvaluationOptions = EvaluationOptions()) -> Result:
    """Judge one solution against one problem in a fresh child process, as `options` say (EvaluationOptions).

    A solution whose import builds extensions that the cache does not hold yet is built first, as a sweep's
    build phase does (build_only): an evaluation's runner never writes the build cache (runner/serve.py).
    """
    if options.build_only or needs_build_phase(solution_path, config):
        built = _evaluate(problem_path, solution_path, config, replace(options, build_only=True))
        if built.status == Status.BUILT:
            _record_built(solution_path, config)
        if options.build_only or built.status != Status.BUILT:
            return built  # a failed build is the verdict
        result = _evaluate(problem_path, solution_path, config, options)
        if built.build_s is None:
            return result  # its import built nothing: what the evaluation built, if anything, is the row's build
        return result.with_outcome(build_s=built.build_s, build_reused=built.build_reused)
    return _evaluate(problem_path, solution_path, config, options)


def needs_build_phase(solution_path: Path, config: RunConfig) -> bool:
    """False when importing the solution builds nothing, or its build is already in the cache: its
    evaluation can start at once."""
    try:
        solution = Solution.read(solution_path)
    except OSError:
        return True  # the build phase reports the unreadable file
    return solution.builds_extension and not _built_marker(solution, config).exists()


def _record_built(solution_path: Path, config: RunConfig) -> None:
    """Record that importing this solution file built all it builds, into the cache."""
    try:
        marker = _built_marker(Solution.read(solution_path), config)
    except OSError:
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _built_marker(solution: Solution, config: RunConfig) -> Path:
    """Where a successful build of this exact solution file is recorded in the cache: its extensions' folders
    name the modules an evaluation's runner loads as they are (cache.BUILT_MODULE)."""
    return config.cache_dir / "loadable" / versions_tag() / solution.sha256


def _evaluate(problem_path: Path, solution_path: Path, config: RunConfig, options: EvaluationOptions) -> Result:
    """evaluate() without the build phase."""
    device = options.device or resolve_device(config.device)
    build_only, on_progress = options.build_only, options.on_progress
    started = time.monotonic()
    identity = options.identity or identify(problem_path, solution_path, config, device, options.run_id)
    sizes = describe_overrides(options.overrides or {})
    try:
        solution = Solution.read(solution_path)
    except OSError as error:
        return recorded(identity, decide(Evidence(Party.CANDIDATE, Kind.LOAD_FAILED, f"cannot read solution: {error}"),
                                         sizes=sizes), started)
    if device == "cpu" and solution.needs_cuda:
        return recorded(identity, decide(Evidence(Party.CANDIDATE, Kind.NEEDS_CUDA, "needs a CUDA device (CUDA kernels "
                                                  "in the source); none here"), sizes=sizes), started)
    log_path = _log_path(config.cache_dir, solution_path, solution.sha256)
    identity = replace(identity, log_path=str(log_path))
    extra_environment = {"MAX_JOBS": str(options.build_threads)} if options.build_threads else {}
    if options.build_nice:
        extra_environment["KBENCH_NICE"] = str(options.build_nice)
    extra_environment.update(options.slot_environment or {})
    overlap_ending = options.overlap_ending and not build_only
    pool = worker_pool()
    with tempfile.TemporaryDirectory(prefix="kbench-job-") as scratch:
        job = Job(problem_path=str(problem_path.resolve()), solution_path=str(solution_path.resolve()),
                  device=device, config=config, result_path=str(Path(scratch) / "result.json"),
                  progress_path=str(Path(scratch) / "progress.json"), overrides=options.overrides or {},
                  log_path=str(log_path), build_only=build_only,
                  wait_for=pool.ending_marker(device) if overlap_ending else "")
        job.save(Path(scratch) / "job.json")

        def report_progress():
            if on_progress is not None:
                on_progress(ProgressRecord.load(Path(job.progress_path)))
        limits = Limits(config, build_only, options.excused_s)

        def past_the_reference() -> bool:  # the next judge's warm-up stays out of the reference's time alone
            return ProgressRecord.load(Path(job.progress_path)).phase not in PHASES_BEFORE_THE_CANDIDATE
        returncode = pool.run(Path(scratch) / "job.json", log_path,
                              lambda: limits.out_of_time(ProgressRecord.load(Path(job.progress_path))),
                              extra_environment, device, while_waiting=report_progress, warm=not build_only,
                              result_path=Path(job.result_path) if overlap_ending else None,
                              on_start=limits.started(options.on_worker_started), top_up_due=past_the_reference)
        progress = ProgressRecord.load(Path(job.progress_path))
        if on_progress is not None:  # the last record too: a short evaluation can end between two reads
            on_progress(progress)
        if returncode != 0:  # a judge killed or dead left its runners' sessions
            for session in progress.runner_sessions:
                kill_session(session)
        outcome = _read_outcome(Path(job.result_path)) if returncode == 0 else None
        if outcome is not None:
            outcome = _with_ending(outcome, Path(job.result_path))
        if outcome is None:
            outcome = lost_worker_outcome(progress, returncode, config, log_path, sizes, limits.exceeded)
    return recorded(identity, outcome, started)


# Where --timeout sets no run limit, the judge derives one once it has timed the reference (judge/progress.py); until
# then kbench's own phases before the candidate (the reference's) have this long.
REFERENCE_PHASES_LIMIT_S = 600.0


class Limits:
    """A job's build limit and run limit, told apart by its progress record, read every pool.WAIT_STEP_S. A build
    phase's seconds count against the build limit, less its waits for compile slots (`excused_s()`); an evaluation's
    count against the build limit while the record says it builds, else against the run limit: --timeout's, or the one
    the judge derives from the reference's time (counted from when it appears; until then the reference's phases have
    REFERENCE_PHASES_LIMIT_S). `exceeded` names the limit that ran out, with its value."""

    def __init__(self, config: RunConfig, build_only: bool, excused_s: Callable[[], float] = lambda: 0.0):
        self.config, self.build_only, self.excused_s = config, build_only, excused_s
        self.last = time.monotonic()
        self.building_s = 0.0
        self.running_s = 0.0
        self.derived_from_s = 0.0  # running_s when the judge's derived run limit appeared
        self.exceeded = ""

    def started(self, on_worker_started: Callable[[int], None]) -> Callable[[int], None]:
        """`on_worker_started`, once the limits' clock starts anew: a worker's own start (a fork server importing
        torch, say) is kbench's, not the job's."""
        def start(pid: int) -> None:
            self.last = time.monotonic()
            on_worker_started(pid)
        return start

    def out_of_time(self, record: ProgressRecord) -> bool:
        now = time.monotonic()
        step, self.last = now - self.last, now
        if self.build_only or record.building:
            self.building_s += step
        else:
            self.running_s += step
        self.exceeded = self._exceeded(record)
        return bool(self.exceeded)

    def _exceeded(self, record: ProgressRecord) -> str:
        config = self.config
        if self.building_s - self.excused_s() > config.build_timeout_s:
            return f"the build limit ({config.build_timeout_s:g} s, --build-timeout)"
        if config.timeout_s is not None:
            return f"the run limit ({config.timeout_s:g} s, --timeout)" if self.running_s > config.timeout_s else ""
        if record.run_limit_s is None:
            self.derived_from_s = self.running_s
            if self.running_s > REFERENCE_PHASES_LIMIT_S:
                return f"the limit of the reference's phases ({REFERENCE_PHASES_LIMIT_S:g} s)"
            return ""
        if self.running_s - self.derived_from_s > record.run_limit_s:
            return f"the run limit ({record.run_limit_s:g} s: {record.run_limit_basis}; --timeout sets one)"
        return ""


def lost_worker_outcome(progress: ProgressRecord, returncode: int | None, config: RunConfig, log_path: Path,
                        sizes: str = "", limit: str = "") -> Outcome:
    """A verdict for a worker that hung or died (verdicts.decide's, from what its progress file says it was doing);
    `limit`: the one that ran out (Limits.exceeded), for a hang."""
    phase = progress.phase
    if returncode is None:
        where = f"building {progress.building}" if progress.building else phase
        what = f"no result within {limit or 'its time limit'} while {where}"
    elif returncode < 0:
        what = f"worker killed by {signal_name(-returncode)} while {phase}"
    else:
        last = _last_log_line(log_path)
        what = f"worker exited with code {returncode} while {phase}" + (f": {last}" if last else "")
    evidence = Evidence(Party.JUDGE, Kind.SILENT if returncode is None else Kind.DIED, what, phase=phase)
    return decide(evidence, official=progress.provisional, progress=progress, strict=config.strict,
                  build_s=progress.build_s, flags=progress.flags, sizes=sizes)


def _read_outcome(path: Path) -> Outcome | None:
    try:
        return Outcome.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _with_ending(outcome: Outcome, result_path: Path) -> Outcome:
    """The outcome, its phase_s with the seconds from its writing to now: until kbench read it (its worker's exit,
    CUDA teardown among it, overlaps the next evaluation), or, where it does not, until the worker's exit."""
    try:
        ending = max(0.0, time.time() - result_path.stat().st_mtime)
    except OSError:
        return outcome
    return replace(outcome, phase_s="; ".join(filter(None, [outcome.phase_s, f"ending the worker {ending:.2f}"])))


def _log_path(cache_dir: Path, solution_path: Path, sha256: str) -> Path:
    folder = cache_dir / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return folder / f"{solution_path.stem}-{sha256[:8]}-{stamp}.log"


def _last_log_line(log_path: Path) -> str:
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def recorded(identity: Identity, outcome: Outcome, started: float) -> Result:
    """The row: identity and outcome, with when it was recorded and how long it took since `started`."""
    return Result.of(identity, outcome, time=timestamp(), wall_s=round(time.monotonic() - started, 3))


def timestamp() -> str:
    """Now, ISO 8601 in UTC, as rows record it."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
