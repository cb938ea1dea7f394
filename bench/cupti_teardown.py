"""Does a kernel profile leave CUPTI's cost in the calls timed after it? The five-kernel `mlp_block` call timed
with CUDA events after each order of profiles a runner could make before its timing loop.

    PYTHONPATH=$PWD python3 bench/cupti_teardown.py [ROUNDS]

Each child is forked from a process that imported what a runner imports, with TEARDOWN_CUPTI=1 as every runner
has it (judge/remote_process.py), creates its CUDA context, warms the call up, makes the profiles its order names,
then times 200 calls (an L2-sized flush before each, as kbench's timer does). Orders: none; a CPU-only op
recording last (kbench's last trial); a kernel profile then a CPU-only op recording (kbench's two last trials); a
kernel profile last (one profile for both, as the twenty-second run tried: its GPU test read the candidate side
10% slow). Prints one line per child: the median and the 10th and 90th percentiles, in ms.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

os.environ["TEARDOWN_CUPTI"] = "1"

import torch  # noqa: E402

from kbench.op_recording import import_op_recording, record_ops  # noqa: E402
from kbench.runner import kernels  # noqa: E402

ROWS, FEATURES = 8192, 1024
CALLS = 200
ORDERS = {
    "no profile": (),
    "op recording last": ("ops",),
    "kernel profile, then op recording": ("kernels", "ops"),
    "kernel profile last": ("kernels",),
}


def child(order: tuple[str, ...]) -> list[float]:
    torch.cuda.set_device(0)
    norm = torch.nn.LayerNorm(FEATURES).cuda()
    up, down = torch.nn.Linear(FEATURES, FEATURES).cuda(), torch.nn.Linear(FEATURES, FEATURES).cuda()
    x = torch.randn(ROWS, FEATURES, device="cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.int8, device="cuda")

    def block():
        return x + down(torch.nn.functional.gelu(up(norm(x))))
    with torch.no_grad():
        for _ in range(5):
            block()
        for step in order:
            if step == "kernels":
                kernels.profile_kernels(block)
            else:
                record_ops(block)
        times = []
        for _ in range(CALLS):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            block()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return times


def main(rounds: int) -> None:
    import_op_recording()
    print(f"{'order':36} {'median ms':>10} {'p10':>8} {'p90':>8}")
    for _ in range(rounds):
        for name, order in ORDERS.items():
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                try:
                    os.write(write, json.dumps(child(order)).encode())
                except Exception as error:
                    print(f"{name}: failed: {error}", flush=True)
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read) as channel:
                times = json.loads(channel.read() or "[]")
            os.waitpid(pid, 0)
            if times:
                deciles = statistics.quantiles(times, n=10)
                print(f"{name:36} {statistics.median(times):10.4f} {deciles[0]:8.4f} {deciles[-1]:8.4f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
