"""Landlock, for a runner's files and signals: what a confined runner may write, read and run (Access, the rules),
and, from ABI 6, signals only to its own processes. One layer (restrict), applied by limits.confine.

Files may be written only under the folders the judge names (its scratch folder; a build's runner also its
solution's own extension folder), its own /proc/PID (CUDA's driver names its threads there), the device files (the
GPU's, /dev/null and the like, not all of /dev) and /dev/shm (anything where it is the judge's own,
limits.private_shm; else only files already there opened, on a CPU). Files may move between its own folders (REFER:
Triton's and Inductor's caches rename). Reads are confined too (switch: KBENCH_RUNNER_READS=open): the system's
files, Python's, the packages imported so far, the CUDA toolkit, /sys, /proc but other processes' folders, its own
folders, and its inputs folder."""

from __future__ import annotations

import ctypes
import glob
import os
import site
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

# In a runner's environment, from the judge (os.pathsep between paths): the folders a candidate's runner may write
# whatever its job; the folders and files it may read (and run) beyond every runner's (read_roots); "private" where
# its /dev/shm is the judge's own (limits.private_shm; "shared" in the judge's environment keeps the machine's);
# "open" where its reads are not confined (a machine whose driver or compilers read somewhere read_roots misses).
OWN_FOLDERS_VARIABLE = "KBENCH_RUNNER_FOLDERS"
READABLE_VARIABLE = "KBENCH_RUNNER_READABLE"
SHM_VARIABLE = "KBENCH_RUNNER_SHM"
READS_VARIABLE = "KBENCH_RUNNER_READS"


def _libc():
    return ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Access:
    """What a confined runner may touch beyond what every runner may (limits.confine): `writable` folders (with
    REFER: a file may move between them, as Triton's and Inductor's caches move theirs), `readable` folders and
    files (read and run only), whether its /dev/shm is the judge's own (limits.private_shm), whether reads are
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


def landlock_available() -> bool:
    """Whether limits.confine() can limit writes and reads here (a kernel with Landlock)."""
    return sys.platform.startswith("linux") and abi(_libc()) >= 1


# Landlock's file-system rights (<linux/landlock.h>), and the ABI version that brought each.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_READING = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # all a rule on a file may hold
_DEVICE_RIGHTS = _READ_FILE | _WRITE_FILE | _IOCTL_DEV
_SYS_LANDLOCK_CREATE_RULESET = 444  # the same numbers on every architecture (Linux 5.13's common table)
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_SCOPE_SIGNAL = 1 << 1
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


def restrict(libc, access: Access) -> list[str]:
    """One Landlock domain for files and signals: the files it may write, read and run (rules), and, from ABI 6,
    signals only to its own processes. One layer, not two: a layer denies every rename and link across folders
    (REFER) unless one of its rules grants it, whatever the rights it handles, so a layer for signals alone
    would refuse Triton's cache its renames."""
    version = abi(libc)
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


def signals_scoped_here() -> bool:
    """Whether limits.confine() can keep a runner's signals to itself here (Landlock ABI 6 or later)."""
    return sys.platform.startswith("linux") and abi(_libc()) >= 6


def abi(libc) -> int:
    """The kernel's Landlock ABI version (negative: none)."""
    return libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))


class _RulesetAttributes(ctypes.Structure):  # struct landlock_ruleset_attr, as of ABI 6
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]
