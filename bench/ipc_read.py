"""Does reading an input through a CUDA IPC mapping, as a runner reads the judge's ring arenas, slow a kernel? (GPU)

    PYTHONPATH=$PWD LOG2N=28 python3 bench/ipc_read.py     # a 1 GB float32 input; LOG2N=23: 33 MB

The parent makes the input and names its allocation by handle (kbench.runner.held.Exports); a child opens it
(held.Imports) and times ReLU batches back to back with CUDA events, on the opened input and on inputs of its own,
each output allocated per call and written into one buffer (out=). Prints microseconds per call, median of 7."""
import base64
import os
import subprocess
import sys

import torch

N = 1 << int(os.environ.get("LOG2N", "28"))


def batch_us(function, inputs, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kept = [function(value) for value in inputs]
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / len(inputs))
        del kept
    return sorted(times)[len(times) // 2]


def child(handle: bytes, at: int) -> None:
    from kbench.runner.held import Imports
    device = torch.device("cuda:0")
    torch.zeros(1, device=device)  # a current context before the driver call, as the judge has
    imports = Imports(device)
    shared = imports._open(handle)[at:at + 4 * N].view(torch.float32)
    own, own_too, out = (torch.randn(N, device=device) for _ in range(3))
    for name, inputs in (("own", [own, own_too] * 2), ("opened", [shared] * 4)) * 2:
        print(f"relu on {name:6s}: {batch_us(torch.relu, inputs):8.1f} us/call (an output per call)  "
              f"{batch_us(lambda value: torch.clamp_min(value, 0, out=out), inputs):8.1f} us/call (out=)", flush=True)
    imports.close()


def parent() -> None:
    from kbench.runner.held import Exports
    value = torch.randn(N, device="cuda:0")
    torch.cuda.synchronize()
    exports = Exports()
    exports.begin()
    place = exports.export(value)
    handle = exports.handles[place.handle]
    subprocess.run([sys.executable, __file__, "child", base64.b64encode(handle).decode(), str(place.at)], check=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(base64.b64decode(sys.argv[2]), int(sys.argv[3]))
    else:
        parent()
