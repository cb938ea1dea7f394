"""Run evaluations in child processes and turn whatever happens to them into a Result.

`evaluate()` is the library entry point: one problem, one solution, one config -> one Result. It never
raises for anything the candidate does; the parent always gets a row to write.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path

from kbench.config import RunConfig
from kbench.forkserver import ForkedWorker, ForkServer, server_key
from kbench.problem import describe_overrides
from kbench.results import Result, Status, SweepResult
from kbench.solution import Solution
from kbench.guards import SWEEP_FAILED
from kbench.worker import Job, strict_verdict

_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


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


def evaluate(problem_path: Path, solution_path: Path, config: RunConfig, *, device: str | None = None,
             overrides: dict | None = None, run_id: str = "", build_only: bool = False,
             build_threads: int | None = None, build_nice: int = 0, slot_environment: dict | None = None) -> Result:
    """Judge one solution against one problem in a fresh child process.

    With build_only, the child only imports the solution (building its extensions into the cache)
    and returns status `built`, or the load/compile failure; a later evaluation then starts warm.
    build_threads caps the compiler jobs one build may run (ninja's MAX_JOBS); build_nice lowers the
    build's CPU priority (and its compilers') by that much; slot_environment tells its compilers where
    to wait for a compile slot (slots.SlotServer.environment).
    """
    device = device or resolve_device(config.device)
    overrides = overrides or {}
    started = time.monotonic()
    base = Result(problem=problem_path.stem, solution=str(solution_path), status=Status.CRASHED,
                  problem_path=str(problem_path), problem_hash=file_hash(problem_path), device=device,
                  settings=config.fingerprint(device), policy=config.policy,
                  sizes=describe_overrides(overrides), run_id=run_id)
    try:
        solution = Solution.read(solution_path)
    except OSError as error:
        return stamped(replace(base, status=Status.LOAD_ERROR, message=f"cannot read solution: {error}"), started)
    base = replace(base, solution_hash=solution.sha256)
    if device == "cpu" and solution.needs_cuda:
        return stamped(replace(base, status=Status.SKIPPED,
                                message="needs a CUDA device (CUDA kernels in the source); none here"), started)
    extra_environment = {"MAX_JOBS": str(build_threads)} if build_threads else {}
    if build_nice:
        extra_environment["KBENCH_NICE"] = str(build_nice)
    extra_environment.update(slot_environment or {})
    child_result = _run_child(problem_path, solution_path, solution, config, device, overrides, run_id, base,
                              build_only, extra_environment)
    return stamped(child_result, started)


def _run_child(problem_path, solution_path, solution, config, device, overrides, run_id, base,
               build_only, extra_environment) -> Result:
    log_path = _log_path(config.cache_dir, solution_path, solution.sha256)
    base = replace(base, log_path=str(log_path))
    with tempfile.TemporaryDirectory(prefix="kbench-job-") as scratch:
        scratch = Path(scratch)
        job = Job(problem_path=str(problem_path.resolve()), solution_path=str(solution_path.resolve()),
                  device=device, config=config.to_dict(), result_path=str(scratch / "result.json"),
                  state_path=str(scratch / "state.json"), overrides=overrides, run_id=run_id,
                  log_path=str(log_path), build_only=build_only)
        job.save(scratch / "job.json")
        returncode = _spawn_and_wait(scratch / "job.json", log_path, config.timeout_s, extra_environment, device)
        result_data = _read_json(Path(job.result_path))
        if result_data is not None and returncode == 0:
            result = Result.from_dict(result_data)
        else:
            result = _lost_worker_result(base, _read_json(Path(job.state_path)) or {}, returncode, config,
                                         log_path)
    return replace(result, solution=str(solution_path), solution_hash=solution.sha256, log_path=str(log_path),
                   problem_path=str(problem_path), problem_hash=base.problem_hash, settings=base.settings)


def _lost_worker_result(base: Result, state: dict, returncode: int | None, config: RunConfig,
                        log_path: Path) -> Result:
    """A verdict for a worker that hung or died, from what its progress file says it was doing."""
    phase = state.get("phase", "starting")
    if returncode is None:
        where = "building an extension" if state.get("building") else phase
        what = f"no result after {config.timeout_s:g} s while {where}"
    elif returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        what = f"worker killed by {name} while {phase}"
    else:
        last = _last_log_line(log_path)
        what = f"worker exited with code {returncode} while {phase}" + (f": {last}" if last else "")
    if phase == "sweeping" and state.get("provisional"):
        # The official verdict was already in; only the sweep configuration being run was lost.
        provisional = Result.from_dict(state["provisional"])
        counts = state.get("sweep_counts") or {}
        # The configuration that killed the worker counts as run and failed.
        sweep = SweepResult(passed=counts.get("passed", 0), run=counts.get("run", 0) + 1,
                            skipped=counts.get("skipped", 0), first_failure=f"{state.get('current')}: {what}")
        message = "; ".join(filter(None, [provisional.message, f"sweep failed at {sweep.first_failure}"]))
        flags = tuple(dict.fromkeys(provisional.flags + (SWEEP_FAILED,)))
        return strict_verdict(replace(provisional, sweep=sweep, flags=flags, message=message), config.strict)
    status = Status.TIMEOUT if returncode is None else Status.CRASHED
    return replace(base, status=status, build_s=state.get("build_s"), flags=tuple(state.get("flags") or ()),
                   message=what)

_live_sessions: set[int] = set()
_live_lock = threading.Lock()
# Pre-started, warmed-up workers waiting for an evaluation (see worker.main), keyed by _spare_key. A
# forked worker's warm-up (creating its CUDA context) takes under a second, so two per device keep
# back-to-back evaluations supplied; each holds a CUDA context's memory on its GPU while it waits.
_spares: dict[tuple[str, str], list[subprocess.Popen | ForkedWorker]] = {}
WAITING_WORKERS_PER_DEVICE = 2
_top_up_lock = threading.Lock()  # one top-up at a time, so two cannot both start the missing workers


def _spare_key(device: str) -> tuple[str, str]:
    """A waiting worker evaluates on `device` among the GPUs visible when it started. A Ray worker runs each
    task under the CUDA_VISIBLE_DEVICES Ray chose for it, so "cuda:0" alone could name another GPU."""
    return device, os.environ.get("CUDA_VISIBLE_DEVICES", "")


def _environment(extra_environment: dict) -> dict:
    # KBENCH_PARENT_PID: the worker dies with this process (worker._die_with_parent).
    return dict(os.environ, PYTHONUNBUFFERED="1", KBENCH_PARENT_PID=str(os.getpid()), **extra_environment,
                PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_PARENT, os.environ.get("PYTHONPATH")])))


# Every worker is started from this one thread. A worker asks Linux to kill it when the thread that
# started it ends (worker._die_with_parent): this thread lives as long as kbench does, while the
# scheduler's build and device threads end with each run and would take live workers with them.
_launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbench-launcher")


def _start_worker(arguments: list[str], stdout, environment: dict) -> subprocess.Popen | ForkedWorker:
    """`python -m kbench.worker ARGUMENTS`, output to `stdout` (a file or DEVNULL): forked from the fork server
    where it can be, else spawned."""
    process = _fork_worker(arguments, None if stdout == subprocess.DEVNULL else stdout.fileno(), environment)
    if process is None:
        process = _start_python("kbench.worker", arguments, stdout=stdout, env=environment)
    return _tracked(process)


def _tracked(process):
    """The worker, recorded as a live session (Ctrl-C and exit kill it)."""
    with _live_lock:
        _live_sessions.add(process.pid)
    return process


def _start_python(module: str, arguments: list[str], stdout=subprocess.DEVNULL, env: dict | None = None,
                  pass_fds: tuple = ()) -> subprocess.Popen:
    """`python -m module arguments` in a session of its own, started from the launcher thread."""
    return _launcher.submit(subprocess.Popen, [sys.executable, "-m", module, *arguments], stdout=stdout,
                            stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env, pass_fds=pass_fds,
                            start_new_session=True).result()


def _start_waiting_worker(device: str) -> subprocess.Popen | ForkedWorker:
    return _start_worker(["--wait", device], subprocess.DEVNULL, _environment({}))


# Fork servers by (forkserver.server_key of the environments they serve, whether they fork waiting workers):
# one for waiting workers, primed for evaluations, and one for builds, which start forking sooner.
_fork_servers: dict[tuple[tuple, bool], ForkServer] = {}
_fork_lock = threading.Lock()


def _fork_worker(arguments: list[str], stdout: int | None, environment: dict) -> ForkedWorker | None:
    if not sys.platform.startswith("linux"):
        return None  # fork after importing torch is only known safe on Linux
    waiting = arguments[0] == "--wait"
    key = server_key(environment), waiting
    with _fork_lock:
        server = _fork_servers.get(key)
        if server is None or not server.alive:
            if server is not None and not server.ever_forked:
                return None  # it died before forking anything: it cannot work here, so spawn
            start = partial(_start_python, "kbench.forkserver")
            server = _fork_servers[key] = ForkServer(start, environment, prime=waiting)
    return server.fork_worker(arguments, environment, stdout)


def prestart_waiting_workers(device: str) -> None:
    """Top up the waiting workers for `device` (e.g. while builds run)."""
    key = _spare_key(device)
    with _top_up_lock:
        with _live_lock:
            missing = WAITING_WORKERS_PER_DEVICE - len(_living_spares(key))
        started = [_start_waiting_worker(device) for _ in range(missing)]
        with _live_lock:
            _spares[key] = _living_spares(key) + started  # re-read: an evaluation may have taken one meanwhile


def _living_spares(key: tuple[str, str]) -> list:
    """The waiting workers for `key` that have not died (call holding _live_lock)."""
    return [process for process in _spares.get(key, []) if process.poll() is None]


def _take_waiting_worker(device: str) -> subprocess.Popen | ForkedWorker:
    """The longest-waiting worker for `device` (started now if there is none); then top up the pool."""
    key = _spare_key(device)
    with _live_lock:
        waiting = _living_spares(key)
        taken = waiting.pop(0) if waiting else None
        _spares[key] = waiting
    if taken is None:
        taken = _start_waiting_worker(device)
    prestart_waiting_workers(device)
    return taken


def _spawn_and_wait(job_path: Path, log_path: Path, timeout_s: float, extra_environment: dict,
                    device: str) -> int | None:
    """Run one job in a worker of its own session; kill the whole session when done or out of time.

    Evaluations go to a waiting worker (already warm); builds, which set their own environment,
    start a worker of their own (forked too, where it can be). Returns the exit code (negative: killed
    by that signal), or None on timeout.
    """
    with log_path.open("ab") as log:
        if extra_environment:
            process = _start_worker([str(job_path)], log, _environment(extra_environment))
        else:
            process = _take_waiting_worker(device)
            try:
                process.stdin.write(f"{job_path}\n".encode())
                process.stdin.flush()
            except OSError:
                pass  # the waiting worker died: its exit code tells what happened
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            kill_session(process.pid)
            process.wait()
            with _live_lock:
                _live_sessions.discard(process.pid)


def stop_waiting_workers() -> None:
    """Kill the pre-started workers (at exit: nothing may outlive kbench)."""
    with _live_lock:
        spares = [process for waiting in _spares.values() for process in waiting]
        _spares.clear()
    for process in spares:
        kill_session(process.pid)
        process.wait()
        with _live_lock:
            _live_sessions.discard(process.pid)


def _stop_at_exit() -> None:
    stop_waiting_workers()
    with _fork_lock:
        for server in _fork_servers.values():
            server.stop()
        _fork_servers.clear()


atexit.register(_stop_at_exit)


def kill_all_workers() -> None:
    """Ctrl-C: kill every running worker session (builds and evaluations) so nothing outlives kbench."""
    with _live_lock:
        sessions = list(_live_sessions)
    for session_id in sessions:
        kill_session(session_id)


def kill_session(session_id: int) -> None:
    """Kill the worker's whole session: the worker and everything it started.

    A process group is not enough: ninja puts each compiler command in a group of its own, so nvcc
    and cc1plus would outlive a killed worker. They all stay in the worker's session, though.
    """
    try:
        os.killpg(session_id, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(50):
        members = _session_members(session_id)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def _session_members(session_id: int) -> list[int]:
    """Processes whose session id is `session_id` (Linux /proc; elsewhere, none found)."""
    members = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp session ...
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == session_id and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _log_path(cache_dir: Path, solution_path: Path, sha256: str) -> Path:
    folder = cache_dir / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return folder / f"{solution_path.stem}-{sha256[:8]}-{stamp}.log"


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _last_log_line(log_path: Path) -> str:
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def stamped(result: Result, started: float) -> Result:
    """The result with when it was recorded and how long it took since `started` (time.monotonic())."""
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
    return replace(result, time=now, wall_s=round(time.monotonic() - started, 3))
