"""The boundary between the judge and the judged.

The judge (kbench.judge.worker, kbench.judge.evaluation and what they call) holds the problem, the reference,
the inputs and every decision. A runner (kbench.runner.serve, a process of its own, started by the judge) imports the
candidate, builds ModelNew and calls it. They speak through two pipes (wire.py: length-prefixed JSON, typed
messages) and through shared buffers the judge allocates (arenas.py: shared memory on a CPU, CUDA IPC on a
GPU). Nothing the runner sends is trusted: the judge reads outputs out of its own buffers and checks them,
and bounds the runner's times by its own clock (remote.py)."""
