"""What holding a batch's outputs costs (kbench/runner/held.py), on a GPU:

    PYTHONPATH=$PWD python3 bench/held_cost.py

A child process runs batches of K ReLU calls on distinct inputs and times them with CUDA events of its own, in
turn: each output dropped at once (the allocator reuses one block), K outputs kept alive, kept and named by CUDA IPC
handle (held.Exports, after the batch), and named and opened by the parent, which copies them out (held.Imports)
before the next batch. Prints, per size, the GPU time per call in each way, the naming's host time per call, and
the parent's copy per call. The kernels' time should not depend on the way.
"""

from __future__ import annotations

import base64
import statistics
import time

import torch
import torch.multiprocessing as mp

WAYS = ("dropped", "kept", "named", "named+opened", "dropped")
ROUNDS = 8


def child(connection, numel: int, count: int) -> None:
    from kbench.runner.held import Exports

    inputs = [torch.randn(numel, device="cuda") for _ in range(count)]
    exports = Exports()
    for way in WAYS:
        per_call, naming = [], []
        for _ in range(ROUNDS):
            kept = []
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for x in inputs:
                output = torch.relu(x)
                if way != "dropped":
                    kept.append(output)
            end.record()
            torch.cuda.synchronize()
            per_call.append(start.elapsed_time(end) / count * 1e3)
            if way.startswith("named"):
                started = time.perf_counter()
                exports.begin()
                places = [exports.export(output) for output in kept]
                naming.append((time.perf_counter() - started) / count * 1e6)
                if way == "named+opened":
                    connection.send((exports.to_wire(), [place.to_wire() for place in places]))
                    connection.recv()
        named = f", naming {statistics.median(naming):.2f} us/call on the host" if naming else ""
        print(f"{numel * 4 / 1e6:9.1f} MB x {count:3d}  {way:13s} {statistics.median(per_call[2:]):9.2f} us/call "
              f"on the GPU{named}", flush=True)
    connection.send(None)


def parent(numel: int, count: int) -> None:
    from kbench.runner.held import Imports
    from kbench.runner.wire import HeldRef

    ours, theirs = mp.Pipe()
    process = mp.get_context("spawn").Process(target=child, args=(theirs, numel, count))
    process.start()
    device = torch.device("cuda")
    imports = Imports(device)
    slots = list(torch.empty(count, numel, device=device).unbind(0))
    copies = []
    while (message := ours.recv()) is not None:
        handles, places = message
        handles = [base64.b64decode(handle) for handle in handles]
        torch.cuda.synchronize()
        started = time.perf_counter()
        sources = [imports.place(handles[number], HeldRef(number, at, tuple(stride), offset), torch.float32,
                                 (numel,))[0] for number, at, stride, offset in places]
        torch._foreach_copy_(slots, sources)
        torch.cuda.synchronize()
        copies.append((time.perf_counter() - started) / count * 1e6)
        imports.close_unused()
        ours.send(1)
    process.join()
    imports.close()
    print(f"{numel * 4 / 1e6:9.1f} MB x {count:3d}  the parent's copy of held outputs "
          f"{statistics.median(copies[2:]):.1f} us/call (its first {copies[0]:.1f})", flush=True)


if __name__ == "__main__":
    for numel, count in ((1 << 23, 36), (1 << 28, 2)):
        parent(numel, count)
