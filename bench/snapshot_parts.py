"""What a reference snapshot and a checkpoint cost, part by part, on a GPU (milliseconds, median).

    PYTHONPATH=$PWD python3 bench/snapshot_parts.py [PROBLEM ...]

For each problem (at its official sizes), two fresh processes warmed up as a waiting worker is: one times
the reference's first call without the profiler, the other takes the snapshot's first capture and
probe cold. Both then time steady captures, comparisons, and the checkpoint's other reads.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

PROBLEMS = ["problems/convt1d.py", "problems/convt2d_asym.py", "problems/convt1d_dilated.py"]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        return _one(argv[1], argv[2])
    for path in argv or PROBLEMS:
        for mode in ("plain-first-call", "cold-snapshot"):
            subprocess.run([sys.executable, __file__, "--one", path, mode], check=False)
    return 0


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _span(name: str, work, repeats: int = 1):
    times, result = [], None
    for _ in range(repeats):
        _synchronize()
        started = time.perf_counter()
        result = work()
        _synchronize()
        times.append((time.perf_counter() - started) * 1e3)
    first = f" (first {times[0]:.2f})" if repeats > 1 else ""
    print(f"  {name:42} {statistics.median(times):8.2f} ms{first}", flush=True)
    return result


def _one(path: str, mode: str) -> int:
    import torch

    from kbench import guards, policy, worker
    from kbench import reference_guard as guard
    from kbench.loading import build_reference, call_reference, input_maker
    from kbench.problem import load_module

    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # on a CPU: that it runs
    worker._warm_up(str(device))
    problem = load_module(Path(path), "kbench_problem")
    print(f"{path}: {mode}")
    model, _ = _span("build_reference", lambda: build_reference(problem, 42, device))
    inputs = input_maker(problem, device)(42)

    def call():
        guards.poison(call_reference(model, inputs, device))
    if mode == "plain-first-call":
        _span("first call (no profiler)", call)
        _span("second call (no profiler)", call)
        _span("aten ops of a call (profiler)", lambda: guard._aten_ops(call), 3)
    else:
        snapshot = _span("snapshot init", lambda: guard.ReferenceSnapshot(problem, model))
        _span("first capture", snapshot.capture)
        _span("aten ops of the first call (profiler)", lambda: guard._aten_ops(call))
    snapshot = guard.ReferenceSnapshot.take(problem, model, probe=call)
    _span("capture", snapshot.capture, 10)
    _span("changed (a checkpoint's comparison)", snapshot.changed, 10)
    _span("contents (checksums)", lambda: snapshot.checksum.contents(list(model.parameters())), 10)
    _span("dispatcher state", lambda: guard._dispatcher_state(snapshot.ops), 10)
    watch = guards.Watch()
    watch.reference = snapshot
    _span("Watch.findings (a whole checkpoint)", lambda: watch.findings("timing"), 10)
    _span("settings", policy.snapshot_settings, 10)
    _span("harness functions", watch.harness.changed, 10)
    _span("reference call", call, 5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
