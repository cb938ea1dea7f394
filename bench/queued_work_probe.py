"""Does GPU work that a stopped process queued before it was stopped slow what is timed next, and can a probe
see it? On a GPU machine: `python3 bench/queued_work_probe.py [--spin-ms 0 0.5 2 10]`.

The judge stops the candidate's runner (cgroup freezer, SIGSTOP) while it times the reference, but work the
runner queued on the GPU before that runs on (docs/guards.md: caught only from a 2x slowdown). Here a child
process stands for the candidate's runner: it queues one spin kernel of SPIN ms on the GPU, says so, and is
stopped with SIGSTOP; this process then stands for the reference's runner. For each SPIN it measures
(1) a GPU-bound call (a ConvTranspose1d, one long cuDNN kernel) timed with CUDA events at once, against its
time on an idle GPU, and (2) a probe (a one-element add and a device synchronisation, timed on the host): its
first latency after the child stopped, and how long probing took until one probe came back as fast as on the
idle GPU, then the call timed after that wait. Prints one row per SPIN. `--busy-host N` measures the idle GPU's
probes again beside N busy processes (a sweep's compilers): a probe's threshold must hold on a loaded host too.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import time

import torch

WORKLOAD = dict(batch=8, channels=512, kernel=21, length=3980)  # tests/fixtures/cheats/problems/convt1d_large.py
PROBES_IDLE = 200
FREE_FACTOR = 3.0  # a probe within this many times the idle median (and 0.1 ms) finds the GPU free
WAIT_CAP_S = 5.0


def _child(commands, replies) -> None:
    torch.cuda.init()
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    replies.send(_cycles_per_ms())
    while True:
        cycles = commands.recv()
        if cycles is None:
            return
        torch.cuda._sleep(int(cycles))  # queued; not waited for
        replies.send("queued")


def _busy() -> None:
    while True:
        pass


def _cycles_per_ms() -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    return 10_000_000 / start.elapsed_time(end)


def _probe_ms(cell: torch.Tensor) -> float:
    started = time.perf_counter()
    cell.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1e3


def _timed_ms(call) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def _wait_free(cell: torch.Tensor, free_ms: float) -> tuple[float, float, int]:
    """(first probe's ms, ms until a probe came back free, probes taken)."""
    started = time.perf_counter()
    first = _probe_ms(cell)
    probes, latest = 1, first
    while latest > free_ms and time.perf_counter() - started < WAIT_CAP_S:
        latest = _probe_ms(cell)
        probes += 1
    return first, (time.perf_counter() - started) * 1e3, probes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spin-ms", type=float, nargs="+", default=[0.0, 0.5, 2.0, 10.0, 40.0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--busy-host", type=int, default=0, metavar="N")
    parser.add_argument("--length-scale", type=float, default=1.0,
                        help="the call's input length times this (a call longer than a context's time slice)")
    options = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    commands, child_commands = context.Pipe()
    child_replies, replies = context.Pipe()
    child = context.Process(target=_child, args=(child_commands, child_replies), daemon=True)
    child.start()
    cycles_per_ms = replies.recv()

    conv = torch.nn.ConvTranspose1d(WORKLOAD["channels"], WORKLOAD["channels"], WORKLOAD["kernel"], bias=False).cuda()
    length = int(WORKLOAD["length"] * options.length_scale)
    x = torch.rand(WORKLOAD["batch"], WORKLOAD["channels"], length, device="cuda")
    cell = torch.zeros(1, device="cuda")
    with torch.no_grad():
        call = lambda: conv(x)  # noqa: E731
        for _ in range(3):
            _timed_ms(call)
        idle_ms = statistics.median(_timed_ms(call) for _ in range(20))
        idle_probes = sorted(_probe_ms(cell) for _ in range(PROBES_IDLE))
        free_ms = max(FREE_FACTOR * statistics.median(idle_probes), 0.1)
        print(f"{torch.cuda.get_device_name()}: the call {idle_ms:.3f} ms on an idle GPU; probe median "
              f"{statistics.median(idle_probes) * 1e3:.0f} us, 99th percentile "
              f"{idle_probes[int(0.99 * PROBES_IDLE)] * 1e3:.0f} us; free below {free_ms * 1e3:.0f} us; "
              f"{cycles_per_ms:.0f} spin cycles per ms")
        if options.busy_host:
            busy = [context.Process(target=_busy, daemon=True) for _ in range(options.busy_host)]
            for process in busy:
                process.start()
            time.sleep(1.0)
            loaded = sorted(_probe_ms(cell) for _ in range(PROBES_IDLE))
            for process in busy:
                process.kill()
            print(f"beside {options.busy_host} busy processes: probe median {statistics.median(loaded) * 1e3:.0f} us, "
                  f"99th percentile {loaded[int(0.99 * PROBES_IDLE)] * 1e3:.0f} us, slowest {loaded[-1] * 1e3:.0f} us, "
                  f"{sum(probe > free_ms for probe in loaded)} of {PROBES_IDLE} above the threshold")
        print(f"{'spin ms':>8} {'call at once':>13} {'ratio':>6} {'1st probe ms':>13} {'waited ms':>10} "
              f"{'probes':>7} {'call after':>11} {'ratio':>6}")
        for spin_ms in options.spin_ms:
            queue = lambda measure: _queued(commands, replies, child.pid, spin_ms, cycles_per_ms, measure)  # noqa: E731
            at_once = [queue(lambda: _timed_ms(call)) for _ in range(options.repeats)]
            waits = [queue(lambda: (*_wait_free(cell, free_ms), _timed_ms(call))) for _ in range(options.repeats)]
            first, waited, probes, after = (statistics.median(column) for column in zip(*waits))
            print(f"{spin_ms:>8.1f} {statistics.median(at_once):>13.3f} {statistics.median(at_once) / idle_ms:>6.2f} "
                  f"{first:>13.3f} {waited:>10.2f} {probes:>7.0f} {after:>11.3f} {after / idle_ms:>6.2f}")
    commands.send(None)
    child.join(timeout=10)


def _queued(commands, replies, pid: int, spin_ms: float, cycles_per_ms: float, measure):
    """The child queues its spin and is stopped; `measure` runs; the child goes on once its spin has ended."""
    commands.send(spin_ms * cycles_per_ms)
    replies.recv()
    os.kill(pid, signal.SIGSTOP)
    try:
        return measure()
    finally:
        torch.cuda.synchronize()
        time.sleep(spin_ms / 1e3 + 0.05)
        os.kill(pid, signal.SIGCONT)


if __name__ == "__main__":
    main()
