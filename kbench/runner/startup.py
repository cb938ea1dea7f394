"""A runner's process before its job comes (serve.main): the allocator set as in the other runner, what the
candidate's runner imports ahead, and the warm-up (the CUDA context, the libraries, the op recording's first start)
every evaluation needs before its candidate."""

from __future__ import annotations

import ctypes

import torch

from kbench.extensions import import_extension_builder
from kbench.loading import warm_cuda_libraries
from kbench.op_recording import record_ops


# glibc's malloc moves its mmap threshold up to the size of each mmapped block freed, so whether a call's large
# temporaries come fresh from the kernel (faulted in and zeroed, every call) or are reused from the heap depends on
# what the process freed before: the same model cost one runner markedly more CPU time than the other, for a whole
# evaluation. Fixed thresholds (setting them turns the adjustment off) make both runners allocate alike.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20   # glibc's largest (on 64-bit): blocks up to it are reused from the heap
TRIM_THRESHOLD_BYTES = 256 << 20


def fixed_malloc_thresholds() -> None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    except (OSError, AttributeError):  # not glibc
        pass


def import_ahead(for_build: bool) -> None:
    """What the candidate's runner imports before its job comes (about a second, the profiler's part; a build's
    runner, which never records ops nor profiles, only the extension builder: a sweep starts dozens of builds
    at once): imports start no thread (a thread found running when it confines itself is named in a note:
    limits.confine)."""
    import_extension_builder()  # the candidate's build needs it
    if for_build:
        return
    from kbench.op_recording import import_op_recording
    from kbench.runner import kernels  # noqa: F401
    import_op_recording()


def warm_up(device: torch.device, for_candidate: bool = False) -> None:
    """What every evaluation needs before the candidate, made while the runner waits for its job: the CUDA
    context and the libraries (cuBLAS, cuDNN); for the candidate's runner, once confined (each starts threads),
    also the op recording's first start. Its kernel profiler is not started ahead: each profile ends detached
    (judge/runner_start.PROFILER_TEARDOWN), and a first profile made here left the trial's no faster
    (docs/benchmarks.md)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)
    warm_cuda_libraries(device)
    if for_candidate:
        record_ops(lambda: torch.zeros(1) + 1)
