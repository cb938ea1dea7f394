"""What a runner may do, narrowed before it imports the candidate.

- Its own session and process group (the judge starts it so) and death with the judge (processes.die_with_parent).
- Landlock, where the kernel offers it, in one layer (landlock.py: Access, restrict): files written only under the
  folders the judge names, reads confined to what it needs (the system's, Python's, its packages', its own folders,
  its inputs folder, where the judge lends it the job's problem and solution files and its solution's builds; not
  the folders they came from: other solutions, results, the build cache, the judge's worker folder), and, from ABI
  6, no signals to processes outside its own: it cannot stop the reference's runner while the reference is timed,
  nor signal the judge. Its /dev/shm is a tmpfs of the judge's mount namespace where it can be (`private_shm`),
  which goes with the judge and its runners.
- No clone3 (a seccomp filter answers ENOSYS): its CLONE_INTO_CGROUP would start a child outside the
  runner's cgroup, which the judge freezes while the reference is timed (kbench/freezer.py). No
  sched_setaffinity (EPERM): the judge pins it to one CPU while it is timed (processes.on_one_cpu).
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
import platform
import resource
import sys
import threading
from pathlib import Path

from kbench.processes import become_subreaper
from kbench.runner import landlock
from kbench.runner.landlock import SHM_VARIABLE, Access

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNET = 0x40000000
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 2, 4, 1 << 14, 1 << 18
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAPABILITY = 63
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 0
_SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1 << 2
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(platform.machine())
_SYS_CLONE3 = 435  # the same number on every architecture (Linux 5.3's common table)
_SYS_SCHED_SETAFFINITY = {"x86_64": 203, "aarch64": 122}.get(platform.machine(), 0xFFFFFFFF)
_ENOSYS = 38
_EPERM = 1


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def judge_protection() -> None:
    """In the judge: non-dumpable, so a process of the same user without CAP_SYS_PTRACE can neither ptrace it
    nor read /proc/PID/mem or environ; and a subreaper, so whatever its runner leaves behind becomes the
    judge's child, which it can find and kill (remote_process.RunnerProcess.stop), or which, once the judge has
    exited, its fork server adopts in turn (judge/forkserver.py)."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        become_subreaper()


def protect() -> None:
    """In the reference's runner: non-dumpable, as the judge is (judge_protection), so the candidate's runner
    cannot trace it or read its memory; and under the candidate's seccomp filter, so that whatever a filter costs
    a system call, both sides pay it."""
    if sys.platform.startswith("linux"):
        libc = _libc()
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _refuse_clone3(libc)


def confine(access: Access) -> list[str]:
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
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # Landlock asks for it
    notes += landlock.restrict(libc, access)
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


def private_shm() -> bool:
    """In the judge, before it starts its runners: a mount namespace of its own with a fresh tmpfs on /dev/shm,
    which its runners share and which goes when the last of them ends, with whatever they made there (CUDA's
    cuda.shm.* files, torch's shared memory, a candidate's files). Whether it has one: it needs root, a process
    of one thread, and no CUDA MPS (whose clients meet its daemon's files in the machine's /dev/shm); the judge's
    environment may keep the machine's (KBENCH_RUNNER_SHM=shared)."""
    global _private_shm
    if _private_shm is None:
        _private_shm = _make_private_shm()
    return _private_shm


_private_shm: bool | None = None


def private_shm_possible() -> bool:
    """Whether a judge started here would try to give itself a /dev/shm of its own (private_shm)."""
    return (sys.platform.startswith("linux") and os.geteuid() == 0 and os.environ.get(SHM_VARIABLE) != "shared"
            and not os.environ.get("CUDA_MPS_PIPE_DIRECTORY") and not os.path.exists("/tmp/nvidia-mps"))


def _make_private_shm() -> bool:
    if not private_shm_possible() or threading.active_count() > 1:
        return False
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS) != 0:  # refused with threads running, or without CAP_SYS_ADMIN
        return False
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing mounted here reaches the host
        return False
    return libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777") == 0


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _refuse_clone3(libc) -> list[str]:
    """A seccomp filter that answers clone3 with ENOSYS: clone3(CLONE_INTO_CGROUP) would start a child in another
    cgroup given only a directory descriptor, which Landlock lets it open, and out of the freezer's reach
    (kbench/freezer.py). C libraries fall back to clone on ENOSYS, so threads and processes start as before. It
    answers sched_setaffinity with EPERM: on a CPU the judge pins both runners to its own CPU while they are timed
    (processes.on_one_cpu), and a runner that moved itself to an idle CPU would leave the load it shared to the
    other side. (No maintained seccomp binding is installed with torch; the filter is seven instructions.)"""
    program = (_SockFilter * 7)(
        _SockFilter(0x20, 0, 0, 0),                         # load the system call's number
        _SockFilter(0x54, 0, 0, 0xBFFFFFFF),                # without x86's x32 bit
        _SockFilter(0x15, 0, 1, _SYS_CLONE3),               # clone3? then the next, else skip it
        _SockFilter(0x06, 0, 0, 0x00050000 | _ENOSYS),      # return the error ENOSYS
        _SockFilter(0x15, 0, 1, _SYS_SCHED_SETAFFINITY),    # sched_setaffinity? then the next, else skip it
        _SockFilter(0x06, 0, 0, 0x00050000 | _EPERM),       # return the error EPERM
        _SockFilter(0x06, 0, 0, 0x7FFF0000))                # allow
    filters = _SockFprog(len(program), program)
    if _install_filter(libc, filters) != 0:
        return [f"clone3 and sched_setaffinity not refused: a child may be started outside the runner's cgroup, "
                f"and the runner may leave the CPU it is timed on ({os.strerror(ctypes.get_errno())})"]
    return []


def _install_filter(libc, filters) -> int:
    """Installs a seccomp filter without the speculation mitigations a kernel may force on filtered processes
    (SECCOMP_FILTER_FLAG_SPEC_ALLOW): they slow a runner's own code, the candidate's Python and launches, by
    several percent, and only one side of a comparison would pay them. prctl where the kernel lacks the flag."""
    if _SYS_SECCOMP is not None:
        if libc.syscall(ctypes.c_long(_SYS_SECCOMP), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                        ctypes.c_uint(_SECCOMP_FILTER_FLAG_SPEC_ALLOW), ctypes.byref(filters)) == 0:
            return 0
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(filters), 0, 0)


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
