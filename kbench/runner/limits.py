"""What a runner may do, narrowed before it imports the candidate.

- Its own session and process group (the judge starts it so) and death with the judge (die_with_parent).
- Landlock, where the kernel offers it and the `landlock` package is installed: files may be written only
  under the folders the judge names (its scratch folder, /dev for the GPU's device files;
  a build's runner also its solution's own extension folder) and its own /proc/PID (CUDA's driver names its
  threads there); reading stays open (the candidate reads the problem, torch and its built extensions).
- No signals to processes outside its own (Landlock's signal scope, ABI 6 and later): it cannot stop the
  reference's runner while the reference is timed, nor signal the judge.
- No clone3 (a seccomp filter answers ENOSYS): its CLONE_INTO_CGROUP would start a child outside the
  runner's cgroup, which the judge freezes while the reference is timed (kbench/freezer.py).
- No new privileges; as root, no network (a fresh network namespace) and no capabilities, so it cannot
  ptrace the judge or read its memory (the judge also makes itself non-dumpable: judge_protection).
- No core files.

All of it is per thread but the core-file limit (Linux 6.18 has no Landlock TSYNC; capabilities and network
namespaces have none): it reaches the calling thread and the threads it starts later, not those already
running, and the candidate can run its code on any thread of its process. So confine() is called while the
runner is its only thread, before the CUDA context and the profiler start theirs; threads found running are
named in a note.

Each protection that cannot be had here is named in the notes confine() returns; the judge records them.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import threading
from pathlib import Path

# The folders a candidate's runner may write whatever its job (os.pathsep between them), from the judge.
OWN_FOLDERS_VARIABLE = "KBENCH_RUNNER_FOLDERS"

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNET = 0x40000000
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAPABILITY = 63
_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (Linux 5.13's common table)
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_SCOPE_SIGNAL = 1 << 1
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SYS_CLONE3 = 435  # the same number on every architecture (Linux 5.3's common table)
_ENOSYS = 38


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """Have Linux kill this process when the judge (the thread that started it) ends."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:
            os._exit(1)


def judge_protection() -> None:
    """In the judge: non-dumpable, so a process of the same user without CAP_SYS_PTRACE can neither ptrace it
    nor read /proc/PID/mem or environ; and a subreaper, so whatever its runner leaves behind becomes the
    judge's child, which it can find and kill (remote_process.RunnerProcess.stop), or which, once the judge has
    exited, its fork server adopts in turn (schedule/forkserver.py)."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        become_subreaper()


def become_subreaper() -> bool:
    """Make orphans of this process's descendants its children; whether it is a subreaper now (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return is_subreaper()


def protect() -> None:
    """In the reference's runner: non-dumpable, as the judge is (judge_protection), so the candidate's runner
    cannot trace it or read its memory."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def is_subreaper() -> bool:
    """Whether orphans of this process's descendants become its children (judge_protection)."""
    if not sys.platform.startswith("linux"):
        return False
    flag = ctypes.c_int(0)
    _libc().prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


def confine(writable: list[Path]) -> list[str]:
    """Narrow this process's rights; returns a note for each protection that could not be applied."""
    notes = []
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not sys.platform.startswith("linux"):
        return ["not Linux: the runner is not confined"]
    libc = _libc()
    others = other_threads()
    if others:
        notes.append(f"{len(others)} thread(s) already running are not confined (started before the runner "
                     f"confined itself): {', '.join(others)}")
    if os.geteuid() == 0:
        if libc.unshare(_CLONE_NEWNET) != 0:
            notes.append(f"network not isolated ({os.strerror(ctypes.get_errno())})")
    else:
        notes.append("network not isolated (needs root)")
    notes += _landlock(writable)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    notes += _scope_signals(libc)
    notes += _refuse_clone3(libc)
    if os.geteuid() == 0:
        notes += _drop_capabilities(libc)
    return notes


def other_threads() -> list[str]:
    """The names of this process's threads other than the calling one."""
    names = []
    for task in os.listdir("/proc/self/task"):
        if int(task) != threading.get_native_id():
            try:
                names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
            except OSError:
                pass  # ended meanwhile
    return names


def landlock_available() -> bool:
    """Whether confine() can limit writes here (the package, and a kernel with Landlock)."""
    try:
        import landlock
        return landlock.landlock_abi_version() >= 1
    except (ImportError, OSError):
        return False


def _landlock(writable: list[Path]) -> list[str]:
    try:
        import landlock
        from landlock import FSAccess
    except ImportError:
        return ["writes not confined (install the 'landlock' package)"]
    try:
        version = landlock.landlock_abi_version()
    except OSError as error:
        return [f"writes not confined (Landlock unavailable: {error.strerror})"]
    reading = FSAccess.EXECUTE | FSAccess.READ_FILE | FSAccess.READ_DIR
    rights = FSAccess.all() & ~reading
    if version < 3:
        rights &= ~FSAccess.TRUNCATE
    try:
        ruleset = landlock.Ruleset(restrict_rules=rights)
        for folder in writable:
            if folder.exists():
                ruleset.allow(str(folder), rules=rights)
        ruleset.allow(_own_proc_folder(), rules=rights)
        ruleset.apply()
    except Exception as error:  # a kernel that refuses part of the ruleset: run without it, and say so
        return [f"writes not confined (Landlock: {error})"]
    return []


_own_proc_fd: int | None = None


def _own_proc_folder() -> str:
    """/proc/PID of this process, which it may write: CUDA's driver names each thread it starts by writing
    /proc/self/task/TID/comm (cuInit fails with error 304 without it), and what else lies there is this
    process's own settings. A Landlock rule holds an inode, and /proc makes a new one for a path whose cached
    entry was dropped: a descriptor held open keeps the entry, and so the inode the rule names."""
    global _own_proc_fd
    folder = f"/proc/{os.getpid()}"
    if _own_proc_fd is None:
        _own_proc_fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
    return folder


def signals_scoped_here() -> bool:
    """Whether confine() can keep a runner's signals to itself here (Landlock ABI 6 or later)."""
    return sys.platform.startswith("linux") and _landlock_abi(_libc()) >= 6


def _landlock_abi(libc) -> int:
    """The kernel's Landlock ABI version (negative: none)."""
    return libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))


class _RulesetAttributes(ctypes.Structure):  # struct landlock_ruleset_attr, as of ABI 6
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def _scope_signals(libc) -> list[str]:
    """A Landlock domain that scopes signals: from here on this process and its children may signal only
    each other. (The `landlock` package has no scopes yet: two system calls; needs no_new_privs, set above.)"""
    version = _landlock_abi(libc)
    if version < 6:
        return [f"signals to other processes not blocked (Landlock ABI {max(version, 0)}, scopes need 6)"]
    attributes = _RulesetAttributes(0, 0, _LANDLOCK_SCOPE_SIGNAL)
    ruleset = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attributes),
                           ctypes.c_size_t(ctypes.sizeof(attributes)), ctypes.c_uint32(0))
    if ruleset < 0:
        return [f"signals to other processes not blocked ({os.strerror(ctypes.get_errno())})"]
    try:
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return [f"signals to other processes not blocked ({os.strerror(ctypes.get_errno())})"]
    finally:
        os.close(ruleset)
    return []


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _refuse_clone3(libc) -> list[str]:
    """A seccomp filter that answers clone3 with ENOSYS: clone3(CLONE_INTO_CGROUP) would start a child in another
    cgroup given only a directory descriptor, which Landlock lets it open, and out of the freezer's reach
    (kbench/freezer.py). C libraries fall back to clone on ENOSYS, so threads and processes start as before.
    (No maintained seccomp binding is installed with torch; the filter is five instructions.)"""
    program = (_SockFilter * 5)(
        _SockFilter(0x20, 0, 0, 0),                         # load the system call's number
        _SockFilter(0x54, 0, 0, 0xBFFFFFFF),                # without x86's x32 bit
        _SockFilter(0x15, 0, 1, _SYS_CLONE3),               # clone3? then the next, else skip it
        _SockFilter(0x06, 0, 0, 0x00050000 | _ENOSYS),      # return the error ENOSYS
        _SockFilter(0x06, 0, 0, 0x7FFF0000))                # allow
    filters = _SockFprog(len(program), program)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(filters), 0, 0) != 0:
        return [f"clone3 not refused: a child may be started outside the runner's cgroup "
                f"({os.strerror(ctypes.get_errno())})"]
    return []


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc) -> list[str]:
    """Root keeps its uid (files it builds stay readable by the judge) but loses every capability: no ptrace
    of the judge, no reading its memory, no mounting, no raw network."""
    for capability in range(_LAST_CAPABILITY + 1):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)  # fails past the kernel's last: harmless
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return [f"capabilities not dropped ({os.strerror(ctypes.get_errno())})"]
    return []
