"""How a runner process starts: its environment (what it keeps of the judge's, its own home and temporary
folders) and the process itself, a fork of the judge where it can be, else a fresh interpreter; in a session of
its own either way (remote_process.RunnerProcess holds it)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from kbench.extensions.slots import SLOTS_VARIABLE

# Kineto detaches CUPTI when a profile ends only when asked: left attached, its instrumentation slows every later
# kernel launch (a five-kernel call read 10% slower), and the candidate's runner profiles before its timed calls
# (its warm-up, library_only) where the reference's does not.
PROFILER_TEARDOWN = {"TEARDOWN_CUPTI": "1"}

# What a runner's environment keeps of the judge's: the toolchain's, the libraries' and the GPU's settings, by name
# or by prefix. Nothing else: not the judge's own variables (KBENCH_*: its folders, its parent, its cache), nor
# whatever else the user who started kbench keeps in theirs.
_KEPT_VARIABLES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS", "CC", "CXX", "CUDAHOSTCXX", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "MAX_JOBS", SLOTS_VARIABLE})
_KEPT_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "PYTORCH_", "OMP_", "MKL_", "KMP_",
                  "OPENBLAS_", "CUBLAS_", "CUDNN_")


def runner_environment(judge: dict[str, str], scratch: Path, settings: dict[str, str]) -> dict[str, str]:
    """A runner's environment: what it keeps of the judge's `judge`, its home, temporary and cache folders in its
    scratch folder (so Triton's ~/.triton, Inductor's and the compilers' temporary files are its own), and the
    judge's `settings` for it."""
    kept = {name: value for name, value in judge.items() if name in _KEPT_VARIABLES or name.startswith(_KEPT_PREFIXES)}
    return {**kept, "HOME": str(scratch), "TMPDIR": str(scratch), "XDG_CACHE_HOME": str(scratch / ".cache"),
            "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"), **settings}


def start_runner(arguments: list[str], environment: dict, keep: tuple[int, ...]):
    """The runner process (kbench.runner.serve with `arguments`), in a session of its own, with `environment` and
    the descriptors `keep` open: a fork of this process where it can be, else a fresh interpreter. A fresh one where
    a fork could not use CUDA, or could inherit a lock held for good: a fork copies only the calling thread, so what
    another thread held (an allocator's lock, an RPC library's) stays held in the child. A judge starts its runners
    before it starts any thread."""
    threads = _threads()
    if torch.cuda.is_initialized() or threads > 1:
        if threads > 1:
            print(f"kbench: a runner starts as a fresh interpreter: this process runs {threads} threads", flush=True)
        return subprocess.Popen([sys.executable, "-m", "kbench.runner.serve", *arguments], pass_fds=keep,
                                start_new_session=True, env=environment, stdin=subprocess.DEVNULL)
    return _fork_runner(arguments, environment, keep)  # torch imported, no CUDA yet: a fork starts in milliseconds


class _Forked:
    """A forked runner, with the part of subprocess.Popen's interface the judge uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("runner", timeout)
            else:
                time.sleep(0.01)
        return self.returncode


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: the threads Python knows of
        return threading.active_count()


def _fork_runner(arguments: list[str], environment: dict, keep: tuple[int, ...]) -> _Forked:
    pid = os.fork()
    if pid:
        _wait_for_own_session(pid)
        return _Forked(pid)
    code = 1
    try:  # the child: a session of its own, only its pipes and the standard streams open
        os.setsid()
        os.closerange(3, min(keep))
        os.closerange(min(keep) + 1, max(keep))
        os.closerange(max(keep) + 1, 1 << 16)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        # The parent's Python streams may write elsewhere than descriptors 1 and 2 (pytest's capture, a
        # notebook), through descriptors closed above: the runner writes to 1 and 2, which its log replaces.
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()  # the judge's variables are not the runner's (runner_environment)
        os.environ.update(environment)
        from kbench.runner import serve as runner
        code = runner.main(arguments)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:  # whatever happened, the child never returns into the parent's code
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait_for_own_session(pid: int) -> None:
    """Until the child's setsid() has run, its process group is the judge's: signals to its group would miss it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if os.getpgid(pid) == pid:
                return
        except ProcessLookupError:
            return
        time.sleep(0.0005)
