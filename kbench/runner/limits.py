"""What a runner may do, narrowed before it imports the candidate.

- Its own session and process group (the judge starts it so) and death with the judge (processes.die_with_parent).
- Landlock, where the kernel offers it, in one layer (Access; `confine`): files may be written only under the
  folders the judge names (its scratch folder; a build's runner also its solution's own
  extension folder), its own /proc/PID (CUDA's driver names its threads there), the device files (the GPU's,
  /dev/null and the like, not all of /dev) and /dev/shm (anything where it is the judge's own, `private_shm`: a
  tmpfs of the judge's mount namespace that goes with the judge and its runners; else only files already there
  opened, on a CPU). Files may move between its own folders (REFER: Triton's and Inductor's caches rename).
  Reads are confined too (switch: KBENCH_RUNNER_READS=open): the system's files, Python's, the packages imported
  so far, the CUDA toolkit, /sys, /proc but other processes' folders, its own folders, and its inputs folder,
  where the judge lends it the job's problem and solution files and its solution's builds; not the folders they
  came from (other solutions, results), not the build cache, not the judge's worker folder.
- No signals to processes outside its own (Landlock's signal scope, ABI 6 and later, in the same layer): it cannot
  stop the reference's runner while the reference is timed, nor signal the judge.
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
import glob
import os
import platform
import resource
import site
import stat
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from kbench.processes import become_subreaper

# In a runner's environment, from the judge (os.pathsep between paths): the folders a candidate's runner may write
# whatever its job; the folders and files it may read (and run) beyond every runner's (read_roots); "private" where its
# /dev/shm is the judge's own (private_shm; "shared" in the judge's environment keeps the machine's); "open" where
# its reads are not confined (a machine whose driver or compilers read somewhere read_roots misses).
OWN_FOLDERS_VARIABLE = "KBENCH_RUNNER_FOLDERS"
READABLE_VARIABLE = "KBENCH_RUNNER_READABLE"
SHM_VARIABLE = "KBENCH_RUNNER_SHM"
READS_VARIABLE = "KBENCH_RUNNER_READS"

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNET = 0x40000000
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 2, 4, 1 << 14, 1 << 18
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAPABILITY = 63
_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (Linux 5.13's common table)
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_SCOPE_SIGNAL = 1 << 1
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 0
_SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1 << 2
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(platform.machine())
_SYS_CLONE3 = 435  # the same number on every architecture (Linux 5.3's common table)
_ENOSYS = 38


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


@dataclass(frozen=True)
class Access:
    """What a confined runner may touch beyond what every runner may (limits.confine): `writable` folders (with
    REFER: a file may move between them, as Triton's and Inductor's caches move theirs), `readable` folders and
    files (read and run only), whether its /dev/shm is the judge's own (private_shm), whether reads are
    confined at all, whether it drives a GPU."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    private_shm: bool = False
    confine_reads: bool = True
    gpu: bool = False

    @classmethod
    def from_environment(cls, writable=(), readable=(), gpu: bool = False) -> "Access":
        """What the judge named in the runner's environment, plus `writable` and `readable`."""
        def named(variable: str) -> tuple[Path, ...]:
            return tuple(Path(path) for path in os.environ.get(variable, "").split(os.pathsep) if path)
        return cls(writable=named(OWN_FOLDERS_VARIABLE) + tuple(map(Path, writable)),
                   readable=named(READABLE_VARIABLE) + tuple(map(Path, readable)),
                   private_shm=os.environ.get(SHM_VARIABLE) == "private",
                   confine_reads=os.environ.get(READS_VARIABLE) != "open", gpu=gpu)


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
    notes += _landlock(libc, access)
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
    """Whether confine() can limit writes and reads here (a kernel with Landlock)."""
    return sys.platform.startswith("linux") and _landlock_abi(_libc()) >= 1


# Landlock's file-system rights (<linux/landlock.h>), and the ABI version that brought each.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_READING = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # all a rule on a file may hold
_DEVICE_RIGHTS = _READ_FILE | _WRITE_FILE | _IOCTL_DEV
_SYS_LANDLOCK_ADD_RULE = 445
_LANDLOCK_RULE_PATH_BENEATH = 1
# What every process reads: the system's programs, libraries and settings, /sys (CUDA's driver and the CPU's
# description). Not /home, /root, /tmp, /var, /run, /srv, /mnt, /media: where solutions, results and caches live.
SYSTEM_READ_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/sys")
# The device files a runner may open for writing (and ioctl): the GPU's, and the usual sources and sinks.
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia*")


def _fs_rights(version: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE to MAKE_SYM
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    if version >= 5:
        rights |= _IOCTL_DEV
    return rights


class _PathBeneath(ctypes.Structure):  # struct landlock_path_beneath_attr (packed)
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock(libc, access: Access) -> list[str]:
    """One Landlock domain for files and signals: the files it may write, read and run (rules), and, from ABI 6,
    signals only to its own processes. One layer, not two: a layer denies every rename and link across folders
    (REFER) unless one of its rules grants it, whatever the rights it handles, so a layer for signals alone
    would refuse Triton's cache its renames."""
    version = _landlock_abi(libc)
    if version < 1:
        return [f"writes and reads not confined (no Landlock: {os.strerror(ctypes.get_errno())})",
                "signals to other processes not blocked (no Landlock)"]
    handled = _fs_rights(version) & (~0 if access.confine_reads else ~_READING)
    scoped = _LANDLOCK_SCOPE_SIGNAL if version >= 6 else 0
    notes = [] if scoped else [f"signals to other processes not blocked (Landlock ABI {version}, scopes need 6)"]
    if not access.confine_reads:
        notes.append(f"reads not confined ({READS_VARIABLE}=open)")
    if access.gpu and not access.private_shm:
        notes.append("files it makes in /dev/shm outlive it (CUDA's driver makes some; a /dev/shm of the judge's "
                     "own needs root)")
    attributes = _RulesetAttributes(handled, 0, scoped)
    ruleset = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attributes),
                           ctypes.c_size_t(ctypes.sizeof(attributes)), ctypes.c_uint32(0))
    if ruleset < 0:
        return notes + [f"writes and reads not confined, signals not blocked (Landlock: "
                        f"{os.strerror(ctypes.get_errno())})"]
    try:
        for path, rights in _rules(access, handled):
            notes += _add_rule(libc, ruleset, path, rights & handled)
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return notes + [f"writes and reads not confined, signals not blocked (Landlock: "
                            f"{os.strerror(ctypes.get_errno())})"]
    finally:
        os.close(ruleset)
    return notes


def _rules(access: Access, handled: int) -> list[tuple[str, int]]:
    """(path, rights) for every rule: its folders, its /proc/PID, the device files, /dev/shm, and, when reads are
    confined, what it may read."""
    rules = [(str(folder), handled) for folder in access.writable]
    rules.append((_held(f"/proc/{os.getpid()}"), handled))
    rules += [(device, _DEVICE_RIGHTS | _READ_DIR) for pattern in DEVICE_FILES for device in glob.glob(pattern)]
    # A private /dev/shm goes with the judge: anything may be made there. The machine's outlives the runner: it may
    # open what is there (CUDA IPC's files of the judge's) but not make files, except on a GPU, whose driver does.
    rules.append(("/dev/shm", handled if access.private_shm or access.gpu else _READ_FILE | _WRITE_FILE))
    if access.confine_reads:
        rules += [(root, _READING) for root in read_roots()]
        rules += [(str(path), _READING) for path in access.readable]
        rules.append(("/dev", _READ_DIR))
        rules += [(_held(entry), _READING) for entry in _proc_entries()]
    return rules


def _add_rule(libc, ruleset: int, path: str, rights: int) -> list[str]:
    """A rule giving `rights` beneath `path` (a file's rule keeps only the rights a file can have); a path that
    does not exist gets none."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        if not rights:
            return []
        rule = _PathBeneath(rights, fd)
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                        ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            return [f"no Landlock rule for {path} ({os.strerror(ctypes.get_errno())})"]
    finally:
        os.close(fd)
    return []


def read_roots() -> list[str]:
    """Where a runner may read and run whatever its job: the system's files, Python's (its prefixes and
    site-packages), the packages imported so far (kbench among them, wherever it is installed), the CUDA
    toolkit. Not the folders those packages were found through (a checkout on PYTHONPATH holds solutions and
    results): a package is readable by its own folder."""
    roots = [*SYSTEM_READ_ROOTS, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    roots += site.getsitepackages() + [site.getusersitepackages()]
    builder = sys.modules.get("torch.utils.cpp_extension")
    roots += [home for home in (getattr(builder, "CUDA_HOME", None), os.environ.get("CUDA_HOME"),
                                os.environ.get("CUDA_PATH")) if home]
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        folders = getattr(module, "__path__", None)
        if folders is not None:
            roots += [str(folder) for folder in folders]
        elif isinstance(getattr(module, "__file__", None), str):
            roots.append(module.__file__)  # a module of one file: that file alone
    return sorted({os.path.abspath(root) for root in roots if root and os.path.exists(root)})


def _proc_entries() -> list[str]:
    """/proc's entries but the processes' folders (their command lines and environments): the kernel's and the
    driver's descriptions (/proc/driver/nvidia, /proc/devices, /proc/cpuinfo, /proc/sys...). Its own folder has a
    rule of its own; /proc/self leads there."""
    return [f"/proc/{name}" for name in os.listdir("/proc")
            if not name.isdigit() and not os.path.islink(f"/proc/{name}")]


_held_fds: dict[str, int] = {}


def _held(path: str) -> str:
    """`path` (in /proc), kept open: a Landlock rule holds an inode, and /proc makes a new one for a path whose
    cached entry was dropped; a descriptor held open keeps the entry, and so the inode the rule names. (CUDA's
    driver names each thread it starts by writing /proc/self/task/TID/comm: cuInit fails with error 304
    without it.)"""
    if path not in _held_fds:
        try:
            _held_fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            pass
    return path


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
    if _install_filter(libc, filters) != 0:
        return [f"clone3 not refused: a child may be started outside the runner's cgroup "
                f"({os.strerror(ctypes.get_errno())})"]
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
