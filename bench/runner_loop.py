"""The runner's batch loop against a plain loop, in one process on a GPU: what kbench's runner adds per call.

    PYTHONPATH=$PWD python3 bench/runner_loop.py

ReLU on 2**23 float32, each call on an input set of its own, L2 flushed before each batch (as the judge flushes it),
batches of 16 and of 112 calls. Prints microseconds per call, median of 10 batches after 2: `plain` (a list
comprehension of calls, then a synchronisation), `held` and `copied` (kbench.runner.batches.Ring.batch with its
outputs held, or copied into slots), `events` (CUDA events around the plain loop: the kernels back to back) and
`enqueue` (the plain loop's host time before the synchronisation). No judge, no wire: the rest of kbench's per-call
time in an evaluation is the judge's."""
import statistics
import time

import torch
import torch.nn as nn

from kbench.judge.timing import CudaEventTimer
from kbench.runner.batches import Ring

DEVICE = torch.device("cuda")


class Relu(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def per_call_us(batch, calls: int, flusher: CudaEventTimer) -> float:
    """The median of 10 batches (after 2), in microseconds per call: the batch's own figure in ms where it returns one,
    else its host wall time."""
    times = []
    for _ in range(12):
        flusher.flush()
        torch.cuda.synchronize()
        started = time.perf_counter()
        figure = batch()
        times.append(figure if isinstance(figure, float) else (time.perf_counter() - started) * 1e3)
    return statistics.median(times[2:]) * 1e3 / calls


def main() -> None:
    model, flusher = Relu(), CudaEventTimer(DEVICE)
    for calls in (16, 112):
        sets = [[torch.randn(1 << 23, device=DEVICE)] for _ in range(calls)]
        stride = 4 << 23
        ring = Ring()
        ring.load(sets, [(torch.empty(calls * stride, dtype=torch.uint8, device=DEVICE), stride)])

        def plain():
            kept = [model(*inputs) for inputs in sets]  # noqa: F841 (alive until the synchronisation)
            torch.cuda.synchronize()

        def events():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            kept = [model(*inputs) for inputs in sets]  # noqa: F841
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        def enqueue():
            started = time.perf_counter()
            kept = [model(*inputs) for inputs in sets]  # noqa: F841
            spent = (time.perf_counter() - started) * 1e3
            torch.cuda.synchronize()
            return spent

        batches = {"plain": plain, "held": lambda: ring.batch(model, {"count": calls, "hold": True}, DEVICE),
                   "copied": lambda: ring.batch(model, {"count": calls}, DEVICE), "events": events,
                   "enqueue": enqueue}
        figures = {name: per_call_us(batch, calls, flusher) for name, batch in batches.items()}
        print(f"{calls:4d} calls: " + ", ".join(f"{name} {us:.1f} us" for name, us in figures.items()), flush=True)
        del sets, ring
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
