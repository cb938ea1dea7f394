"""Which of kbench's steps before a runner confines itself start a thread, and can a process forked after them
use CUDA? On a GPU machine: `python bench/cuda_threads_probe.py` (add `--nvml` to see what NVML's own
initialisation starts). Prints one row per step: the threads running beside the main one, as the runner's
confinement sees them (limits.other_threads). In a fresh interpreter `import torch` starts OpenMP's pool; a
forked runner carries none of it, and must reach confinement with no thread at all.
"""

from __future__ import annotations

import os
import sys

from kbench.runner.limits import other_threads


def steps():
    import torch  # noqa: F401
    yield "import torch"
    from kbench.op_recording import import_op_recording
    import_op_recording()
    yield "op_recording.import_op_recording()"
    from kbench.extensions import import_extension_builder
    import_extension_builder()
    yield "import_extension_builder()"
    from kbench.runner import kernels  # noqa: F401
    yield "import kbench.runner.kernels"


def nvml_steps():
    import ctypes
    ctypes.CDLL("libnvidia-ml.so.1").nvmlInit_v2()
    yield "nvmlInit_v2()"


def forked_child_uses_cuda() -> str:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import torch
            code = 0 if (torch.ones(4, device="cuda") * 2).sum().item() == 8 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return "yes" if os.waitstatus_to_exitcode(status) == 0 else "no"


def main() -> None:
    print(f"{'step':<34} threads beside the main one")
    for step in (nvml_steps() if "--nvml" in sys.argv else steps()):
        print(f"{step:<34} {', '.join(other_threads()) or '-'}")
    print(f"{'a forked child uses CUDA':<34} {forked_child_uses_cuda()}")


if __name__ == "__main__":
    main()
