"""The worker processes of one kbench process: started, handed jobs, killed.

Every worker is started from one launcher thread (a worker asks Linux to kill it when the thread that
started it ends: processes.die_with_parent; this thread lives as long as kbench does, while the scheduler's
build and device threads end with each run and would take live workers with them). Workers are forked
from fork servers (forkserver.py) where they can be, else spawned. Evaluations go to waiting workers that
warmed up (torch imported, CUDA context created) while the previous evaluation ran; builds, which set
their own environment, get a worker of their own. Each worker runs in a session of its own, which is
killed whole when its job ends, on Ctrl-C and at exit: nothing may outlive kbench.

An evaluation's result is taken the moment its worker has written it; the worker's ending (its runners
reaped, its exit, CUDA teardown and all) then overlaps the next evaluation on the device, whose judge runs its
reference meanwhile and waits for that ending (`Job.wait_for`) before it times anything or loads the candidate
(judge/evaluation.py).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from kbench.processes import WORK_VARIABLE, kill_session
from kbench.schedule import worker_folders
from kbench.schedule.endings import Endings
from kbench.schedule.forkserver import ForkedWorker, ForkServer, ForkServers

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
Worker = subprocess.Popen | ForkedWorker


class WorkerPool:
    """Waiting workers per device, the fork servers, and every live worker session."""

    # A forked worker's warm-up creates three CUDA contexts (the judge's and its two runners') and starts the
    # profiler in the candidate's runner: seconds, longer than the shortest evaluations, so three per device
    # keep back-to-back evaluations supplied; each holds its contexts' memory on its GPU while it waits.
    WAITING_PER_DEVICE = 3

    def __init__(self):
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbench-launcher")
        self._lock = threading.Lock()
        self._top_up_lock = threading.Lock()  # one top-up at a time, so two cannot both start the missing workers
        self._sessions: set[int] = set()
        self._work: dict[int, Path] = {}  # a worker's folder (WORK_VARIABLE), by its pid
        self._waiting: dict[tuple[str, str], list[Worker]] = {}
        self._servers = ForkServers(self._start_python)
        self._generation = 0  # kill_all starts a new one: jobs of an earlier one get no new worker
        self.endings = Endings()  # evaluations ending in the background, and the markers the next judges wait for

    # --- running a job ---------------------------------------------------------------------------

    def run(self, job_path: Path, log_path: Path, out_of_time: Callable[[], bool], extra_environment: dict,
            device: str, while_waiting: Callable[[], None] = lambda: None, warm: bool = True,
            result_path: Path | None = None, on_start: Callable[[int], None] = lambda pid: None,
            top_up_due: Callable[[], bool] = lambda: True) -> int | None:
        """Run one job in a worker; kill the worker's session when done or out of time. Returns the exit
        code (negative: killed by that signal), or None on timeout. `while_waiting` runs about every
        WAIT_STEP_S while the worker runs (to show its progress), then `out_of_time()` (True: its limit ran out,
        the worker's session is killed at once). `warm`: a waiting worker (its CUDA contexts
        made) may take the job; a build, which needs none, gets a fresh one. `result_path`: where the worker
        writes its result; once it exists this returns 0 and the worker ends in the background, the next
        evaluation on `device` waiting for it (ending_marker). `on_start(pid)` is told the worker's pid at once.
        A waiting worker taken is replaced once `top_up_due()` (asked while the worker runs) says so, at the latest
        when it ends: a replacement's warm-up (three CUDA contexts) beside this evaluation's reference timed alone
        would be in what it measures."""
        generation = self._generation
        with log_path.open("ab") as log:
            takes_waiting = warm and not extra_environment
            top_up = _TopUp(lambda: self.prestart(device), top_up_due, needed=takes_waiting)
            if not takes_waiting:
                process = self._start([str(job_path)], log, environment(extra_environment), generation)
            else:
                process = self._adopt(self._take_waiting(device), generation)
                try:
                    process.stdin.write(f"{job_path}\n".encode())
                    process.stdin.flush()
                except OSError:
                    pass  # the waiting worker died: its exit code tells what happened
            on_start(process.pid)
            try:
                returncode = _wait(process, out_of_time, while_waiting, result_path, top_up.when_due)
            except BaseException:
                self._end(process)
                raise
            finally:
                top_up.now()
        if returncode == _RESULT_WRITTEN:
            self._end_in_background(process, device)
            return 0
        self._end(process)
        return returncode

    def ending_marker(self, device: str) -> str:
        """A file that appears once the last evaluation on `device` that ended in the background has ended, its
        runners and its judge gone ("" when there was none): the next judge on the device waits for it."""
        return self.endings.marker(_waiting_key(device))

    def run_helper(self, module: str, arguments: list[str], log_path: Path) -> int:
        """`python -m module arguments` to its end, its output appended to `log_path`: a process of kbench's own
        that runs no candidate code (extensions/primer.py), killed with the workers by kill_all."""
        with log_path.open("ab") as log:
            process = self._start_python(module, arguments, stdout=log, env=environment({}))
            with self._lock:
                self._sessions.add(process.pid)
            try:
                return process.wait()
            finally:
                self._end(process)

    # --- waiting workers ---------------------------------------------------------------------------

    def prestart(self, device: str) -> None:
        """Top up the waiting workers for `device` (e.g. while builds run)."""
        key = _waiting_key(device)
        with self._top_up_lock:
            with self._lock:
                missing = self.WAITING_PER_DEVICE - len(self._living(key))
            try:
                started = [self._start_waiting(device) for _ in range(missing)]
            except PoolClosed:
                return  # kbench is exiting (a run that needed no worker ends before its top-up)
            with self._lock:
                self._waiting[key] = self._living(key) + started  # re-read: an evaluation may have taken one

    def waiting(self, device: str, visible_devices: str | None = None) -> list[Worker]:
        """The living waiting workers for `device` (under CUDA_VISIBLE_DEVICES `visible_devices`: default now)."""
        key = (device, os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible_devices is None else visible_devices)
        with self._lock:
            return self._living(key)

    def stop_waiting(self) -> None:
        """Kill the waiting workers."""
        with self._lock:
            waiting = [process for processes in self._waiting.values() for process in processes]
            self._waiting.clear()
        for process in waiting:
            self._end(process)

    def fork_server(self, waiting: bool) -> ForkServer | None:
        """The fork server for waiting workers (True) or for builds (False), in this environment."""
        return self._servers.get(environment({}), waiting)

    # --- ending ------------------------------------------------------------------------------------

    def kill_all(self) -> None:
        """Ctrl-C: kill every running worker session (builds and evaluations) and the fork servers, at once, so
        nothing outlives kbench; a job already under way gets no new worker (run raises PoolClosed)."""
        with self._lock:
            self._generation += 1
            sessions = list(self._sessions)
        for session_id in sessions:
            kill_session(session_id)
        self._servers.stop()

    def close(self) -> None:
        """At exit: the waiting workers and the fork servers go, and the workers still ending are waited for."""
        self.stop_waiting()
        self._servers.stop()
        self.endings.close(ENDING_S + 5)  # the pool may be used again (a library's next Judge)

    # --- internals ---------------------------------------------------------------------------------

    def _take_waiting(self, device: str) -> Worker:
        """The longest-waiting worker for `device` (started now if there is none; the caller tops up the pool)."""
        key = _waiting_key(device)
        with self._lock:
            waiting = self._living(key)
            taken = waiting.pop(0) if waiting else None
            self._waiting[key] = waiting
        if taken is None:
            taken = self._start_waiting(device)
        return taken

    def _living(self, key: tuple[str, str]) -> list[Worker]:
        """The waiting workers for `key` that have not died (call holding _lock)."""
        return [process for process in self._waiting.get(key, []) if process.poll() is None]

    def _start_waiting(self, device: str) -> Worker:
        return self._start(["--wait", device], subprocess.DEVNULL, environment({}))

    def _start(self, arguments: list[str], stdout, env: dict, generation: int | None = None) -> Worker:
        """`python -m kbench.judge.worker ARGUMENTS`, output to `stdout` (a file or DEVNULL), recorded as a live session
        (for a job of `generation`: killed again, with PoolClosed, when kill_all came in between)."""
        work = worker_folders.make()
        env = dict(env, **{WORK_VARIABLE: str(work)})
        try:
            process = self._fork(arguments, None if stdout == subprocess.DEVNULL else stdout.fileno(), env)
            if process is None:
                if generation is not None and generation != self._generation:
                    raise PoolClosed("the run was interrupted")
                process = self._start_python("kbench.judge.worker", arguments, stdout=stdout, env=env)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        with self._lock:
            self._sessions.add(process.pid)
            self._work[process.pid] = work
        return self._adopt(process, generation)

    def _adopt(self, process: Worker, generation: int | None) -> Worker:
        if generation is not None and generation != self._generation:
            self._end(process)
            raise PoolClosed("the run was interrupted")
        return process

    def _end(self, process: Worker) -> None:
        kill_session(process.pid)
        process.wait()
        _end_adopted(process)
        self._forget(process)

    def _forget(self, process: Worker) -> None:
        with self._lock:
            self._sessions.discard(process.pid)
            work = self._work.pop(process.pid, None)
        if work is not None:
            worker_folders.remove(work)

    def _end_in_background(self, process: Worker, device: str) -> None:
        """A worker that wrote its result ends on its own (its runners reaped, then its exit, CUDA teardown and all)
        while kbench goes on; the marker made once it is gone tells the next judge on `device` that nothing of this
        evaluation, nor of any before it, runs on it any more."""
        def end() -> None:
            try:
                process.wait(timeout=ENDING_S)
            except subprocess.TimeoutExpired:
                pass  # stuck after its verdict: killed below
            kill_session(process.pid)
            process.wait()
            _end_adopted(process)
        self.endings.begin(_waiting_key(device), end, then=lambda: self._forget(process))

    def start_fork_server(self, waiting: bool) -> None:
        """Start the fork server that builds' workers (False) or waiting workers (True) fork from now, ahead of the
        first: its start is an import of torch, which then overlaps what this process does until then."""
        if sys.platform.startswith("linux"):
            self._servers.serving(environment({}), waiting)

    def _fork(self, arguments: list[str], stdout: int | None, env: dict) -> ForkedWorker | None:
        if not sys.platform.startswith("linux"):
            return None  # fork after importing torch is only known safe on Linux
        server = self._servers.serving(env, waiting=arguments[0] == "--wait")
        return None if server is None else server.fork_worker(arguments, env, stdout)

    def _start_python(self, module: str, arguments: list[str], stdout=subprocess.DEVNULL, env: dict | None = None,
                      pass_fds: tuple = ()) -> subprocess.Popen:
        """`python -m module arguments` in a session of its own, started from the launcher thread."""
        try:
            started = self._launcher.submit(subprocess.Popen, [sys.executable, "-m", module, *arguments],
                                            stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                                            pass_fds=pass_fds, start_new_session=True)
        except RuntimeError as error:  # the launcher was shut down: the interpreter is exiting
            raise PoolClosed(str(error)) from error
        return started.result()


class PoolClosed(RuntimeError):
    """No worker can be started for this job: kbench is exiting, or the run was interrupted."""


WAIT_STEP_S = 0.5
RESULT_POLL_S = 0.01  # how often the worker's result file is looked for: the device idles at most this long
ENDING_S = 60.0  # a worker that wrote its result and has not exited by then is killed
_RESULT_WRITTEN = -1000  # _wait's answer when the result exists and the worker is still ending


def _end_adopted(process: Worker) -> None:
    """What an ended forked worker left (its runners, killed, exit beside it), killed and waited for: its fork
    server adopted it (forkserver.py). A spawned worker waits for its runners itself."""
    if isinstance(process, ForkedWorker) and not process.server.end_adopted(ENDING_S):
        print(f"kbench: processes a worker left were still there {ENDING_S:g} s after it ended", file=sys.stderr)


class _TopUp:
    """The waiting workers topped up once (where a waiting worker was taken: `needed`), when `due()` first says so
    (`when_due`) or at the latest `now`."""

    def __init__(self, top_up: Callable[[], None], due: Callable[[], bool], needed: bool):
        self.top_up, self.due = top_up, due
        self.done = not needed

    def when_due(self) -> None:
        if not self.done and self.due():
            self.now()

    def now(self) -> None:
        if not self.done:
            self.done = True
            self.top_up()


def _wait(process: Worker, out_of_time: Callable[[], bool], while_waiting: Callable[[], None],
          result_path: Path | None = None, on_step: Callable[[], None] = lambda: None) -> int | None:
    """The worker's exit code; None once `out_of_time()` (asked every WAIT_STEP_S, after `while_waiting()`) says so;
    _RESULT_WRITTEN when `result_path` exists and the worker has not exited yet. `on_step` runs at every look (every
    RESULT_POLL_S while a result is awaited, else every WAIT_STEP_S)."""
    step = WAIT_STEP_S if result_path is None else RESULT_POLL_S
    progress_due = time.monotonic() + WAIT_STEP_S
    while True:
        try:
            return process.wait(timeout=step)
        except subprocess.TimeoutExpired:
            on_step()
            if result_path is not None and result_path.exists():
                return _RESULT_WRITTEN
            if time.monotonic() >= progress_due:
                progress_due += WAIT_STEP_S
                while_waiting()
                if out_of_time():
                    return None


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def worker_pool() -> WorkerPool:
    """This kbench process's pool, made on first use and closed at exit."""
    global _pool
    with _pool_lock:
        if _pool is None:
            worker_folders.remove_stale()
            _pool = WorkerPool()
            atexit.register(_pool.close)
        return _pool


def _waiting_key(device: str) -> tuple[str, str]:
    """A waiting worker evaluates on `device` among the GPUs visible when it started. A Ray worker runs each
    task under the CUDA_VISIBLE_DEVICES Ray chose for it, so "cuda:0" alone could name another GPU."""
    return device, os.environ.get("CUDA_VISIBLE_DEVICES", "")


def environment(extra: dict) -> dict:
    """A worker's environment: this one, plus `extra`; KBENCH_PARENT_PID: the worker dies with this process."""
    return dict(os.environ, PYTHONUNBUFFERED="1", KBENCH_PARENT_PID=str(os.getpid()), **extra,
                PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_PARENT, os.environ.get("PYTHONPATH")])))

