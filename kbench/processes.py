"""Processes by what Linux says of them: a signal's name, a session killed whole, a process's living children; what
Linux is asked for them: death with the parent, a subreaper's adoptions; and a process's output sent to a job's log.
Used by the parent (killing a worker's session), the fork server, the judge (its runners'), the runners and tests;
imports nothing of kbench."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

# In a judge worker's environment: a folder of its own, removed when the worker ends, where its runners' scratch
# folders are made and after which their cgroups are named (schedule/worker_folders.py makes it).
WORK_VARIABLE = "KBENCH_WORK_DIR"
# In a judge worker's environment when its parent (the fork server) is a subreaper that kills and reaps what the
# judge leaves: the judge then exits right after its verdict, its killed runners ending beside it.
PARENT_REAPS_VARIABLE = "KBENCH_PARENT_REAPS"

_PR_SET_PDEATHSIG = 1  # prctl options, <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def signal_name(number: int) -> str:
    """'SIGSEGV' for 11; the number itself for a signal this platform does not name."""
    return signal.Signals(number).name if number in signal.valid_signals() else str(number)


def die_with_parent(parent: int | None = None) -> None:
    """Have Linux kill this process when its parent dies (strictly: when the parent's thread that started it ends),
    and exit at once where the parent died before the request took effect: where this process's parent is no longer
    `parent` (its process id), or, without one, is init.

    A parent killed outright (a lost Ray worker, kill -9 of kbench) cannot kill what it started, and an orphan
    would run on (a hang: forever) beside the retried evaluation on the same GPU. The kernel's signal works even
    while a candidate spins holding the GIL.
    """
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if (os.getppid() == 1) if parent is None else (os.getppid() != parent):
        os._exit(1)


def become_subreaper() -> bool:
    """Make orphans of this process's descendants its children; whether it is a subreaper now (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return is_subreaper()


def is_subreaper() -> bool:
    """Whether orphans of this process's descendants become its children (become_subreaper)."""
    if not sys.platform.startswith("linux"):
        return False
    flag = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def kill_session(session_id: int) -> None:
    """Kill a worker's whole session: the worker and everything it started.

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
    """Processes whose session id is `session_id`."""
    return _living(lambda fields: int(fields[3]) == session_id)


def children_of(parent: int, zombies: bool = False) -> list[int]:
    """Living processes whose parent is `parent` (and, with `zombies`, the dead ones it has not reaped yet)."""
    listed = _listed_children(parent)
    if listed is None:  # a kernel without /proc/PID/task/TID/children: every process looked at
        return _living(lambda fields: int(fields[1]) == parent, zombies)
    return [pid for pid in listed if zombies or stat_fields(pid)[:1] not in (["Z"], [])]


def _listed_children(parent: int) -> list[int] | None:
    """The children of `parent`'s threads as the kernel lists them (one small file per thread, where a scan of
    /proc reads a file per process); None where it does not."""
    try:
        threads = os.listdir(f"/proc/{parent}/task")
        return [int(pid) for thread in threads
                for pid in Path(f"/proc/{parent}/task/{thread}/children").read_text().split()]
    except (OSError, ValueError):
        return None


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the parenthesised command name, which may hold spaces (state ppid pgrp
    session ...); [] once the process is gone, or not on Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat[stat.rfind(")") + 2:].split()


def parent_of(pid: int) -> int:
    """The parent of `pid` (0 once it is gone)."""
    fields = stat_fields(pid)
    return int(fields[1]) if len(fields) > 1 else 0


def _living(matches: Callable[[list[str]], bool], zombies: bool = False) -> list[int]:
    """Processes, not zombies unless asked for, whose /proc/PID/stat fields after the parenthesised command name
    (state ppid pgrp session ...) match (Linux /proc; elsewhere, none found)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if len(fields) > 3 and (zombies or fields[0] != "Z") and matches(fields):
            found.append(int(entry.name))
    return found


def open_log(path: str) -> int:
    """A job's log, opened for appending (made if missing): the judge and its runners write it. Readable too: a
    confined runner may not open the log by its path, and reads what its builds wrote through this descriptor."""
    return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)


def flush_output() -> None:
    """What this process printed, written out to its stdout and stderr now."""
    sys.stdout.flush()
    sys.stderr.flush()


def output_to(descriptor: int) -> None:
    """This process's stdout and stderr (and those of the processes it starts from now on) to `descriptor`, which
    is closed then."""
    flush_output()
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)


def open_files_to_the_limit() -> None:
    """The soft limit on open files raised to the hard one: a ring of many input sets crosses as a descriptor each,
    held by the judge until sent and by the runner until mapped."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def current_cpu() -> int | None:
    """The CPU this process last ran on (field 39 of /proc/self/stat); None where it cannot be read."""
    fields = stat_fields(os.getpid())
    return int(fields[36]) if len(fields) > 36 else None


@contextlib.contextmanager
def on_one_cpu(pids: list[int]):
    """This process and `pids` on one CPU for the length of the block, then back to the CPUs each had (where it
    still runs): the CPU this process is on, or the next one no other judge holds (claimed_cpu). Processes that take
    turns, never running at once, lose nothing by it, and meet the same neighbours: load that slows one CPU and not
    another then slows all of them alike. Yields the CPU, or None where affinities cannot be set (not Linux, or a
    process refused)."""
    with claimed_cpu() as cpu:
        cpu, before = _pin([os.getpid(), *pids], cpu)
        try:
            yield cpu
        finally:
            _restore(before)


# Where judges on one machine claim the CPUs they time on (a lock file per CPU, held while they time).
CPU_CLAIMS = Path(tempfile.gettempdir()) / f"kbench-cpus-{os.getuid()}"


@contextlib.contextmanager
def claimed_cpu(claims: Path = CPU_CLAIMS):
    """A CPU this process may run on that no other judge on the machine holds, claimed for the block: the one it
    is on if free, else the next free one (judges timing on several GPUs at once would otherwise often pin
    themselves to one CPU and share it). The CPU it is on where all are held, or where claims cannot be made; None
    where it cannot say which CPU it is on."""
    here = current_cpu() if hasattr(os, "sched_setaffinity") else None
    if here is None:
        yield None
        return
    allowed = sorted(os.sched_getaffinity(0))
    start = allowed.index(here) if here in allowed else 0
    with contextlib.ExitStack() as held:
        try:
            claims.mkdir(mode=0o700, exist_ok=True)
            folder = os.open(claims, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # not a link planted there
            held.callback(os.close, folder)
        except OSError:
            folder = None
        in_turn = allowed[start:] + allowed[:start] if folder is not None else []  # none where claims cannot be made
        for cpu in in_turn:
            try:
                claim = os.open(f"cpu{cpu}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=folder)
                held.callback(os.close, claim)
                fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another judge's
            except OSError:
                break
            yield cpu
            return
    yield here


def _pin(pids: list[int], cpu: int | None) -> tuple[int | None, dict[int, set[int]]]:
    """(`cpu`, each thread's CPUs before), or (None, {}) where they could not all be pinned to it. Every thread of
    each process: an affinity is a thread's, and a thread started before the pinning (a candidate's, at import)
    would keep every CPU; threads started later inherit their starter's."""
    before: dict[int, set[int]] = {}
    if cpu is None:
        return None, before
    try:
        for thread in (thread for pid in pids for thread in _threads(pid)):
            try:
                before[thread] = os.sched_getaffinity(thread)
                os.sched_setaffinity(thread, {cpu})
            except ProcessLookupError:
                before.pop(thread, None)  # it ended meanwhile
    except OSError:  # a process gone, or a CPU this one may not use: none pinned
        _restore(before)
        return None, {}
    return cpu, before


def _threads(pid: int) -> list[int]:
    """The thread ids of process `pid` (itself alone where /proc does not list them)."""
    try:
        return [int(task) for task in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _restore(affinities: dict[int, set[int]]) -> None:
    for pid, cpus in affinities.items():
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError:
            pass  # it ended meanwhile
