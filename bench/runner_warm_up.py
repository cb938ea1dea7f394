"""What the candidate's runner's warm-up parts cost on this GPU, and whether a first kernel profile made ahead saves
the trial's profile anything.

    PYTHONPATH=$PWD python3 bench/runner_warm_up.py [ROUNDS]

Each round forks two children of a process that has imported what a runner imports (torch, op recording, the
kernel profiler), as a runner is forked from its judge, with TEARDOWN_CUPTI=1 as every runner has it
(judge/remote_process.py). Each child creates its CUDA context, records ops once, then profiles a call three times
as the "kernels" trial does; one child first makes a profile of its own, as the runner's warm-up did. Prints one
line per child: milliseconds per step.
"""

from __future__ import annotations

import os
import sys
import time

os.environ["TEARDOWN_CUPTI"] = "1"

import torch  # noqa: E402

from kbench.op_recording import import_op_recording, record_ops  # noqa: E402
from kbench.runner import kernels  # noqa: E402


def child(profile_ahead: bool) -> None:
    steps = []

    def timed(name: str, call) -> None:
        started = time.perf_counter()
        call()
        steps.append((name, time.perf_counter() - started))
    timed("context", lambda: (torch.cuda.set_device(0), torch.zeros(1, device="cuda")))
    timed("op recording", lambda: record_ops(lambda: torch.zeros(1) + 1))
    if profile_ahead:
        timed("profile ahead", lambda: kernels.profile_kernels(lambda: torch.zeros(1, device="cuda").add_(1)))
    x = torch.randn(1 << 20, device="cuda")
    for index in range(3):
        timed(f"trial profile {index}", lambda: kernels.profile_kernels(lambda: torch.nn.functional.gelu(x)))
    timed("plain call", lambda: (torch.nn.functional.gelu(x), torch.cuda.synchronize()))
    label = "with a profile ahead   " if profile_ahead else "without a profile ahead"
    print(f"{label}: " + "; ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in steps), flush=True)


def main(rounds: int) -> None:
    import_op_recording()
    for _ in range(rounds):
        for profile_ahead in (True, False):
            pid = os.fork()
            if pid == 0:
                child(profile_ahead)
                os._exit(0)
            os.waitpid(pid, 0)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
