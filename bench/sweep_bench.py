"""How well a sweep keeps the machine busy: wall time against build CPU time and GPU evaluation time.

    PYTHONPATH=$PWD python3 bench/sweep_bench.py [--gpus N] [--cache-dir DIR] [--csv out.csv]

Runs the suite's solutions plus the GPU fixtures of tests/fixtures/cheats through kbench's scheduler
twice: first with an empty build cache on every GPU (builds and evaluations overlap), then again with
every build cached on one GPU. Prints, for the cold run, wall time against max(build CPU time / cores,
GPU evaluation time per device) (target: at most 1.2x; build CPU time is what the build workers and
their compilers used, from each build's cpu_s), when the GPUs started and the builds ended, how many
evaluations ran at once, and the compile slots' record (how long device and host compiles ran and
waited, and the tail after the last compile started); for the warm run the time each evaluation spends
outside its timed GPU work (target: under 3 s); and whether the two runs (N GPUs, then one) gave the
same verdicts.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import torch

from kbench.config import RunConfig
from kbench.schedule.executor import LocalExecutor
from kbench.schedule.scheduler import plan_builds, run_pairs
from kbench.solution import find_pairs

CHEATS = Path("tests/fixtures/cheats")
EXTRA_PAIRS = [
    (Path("tests/fixtures/problems/axpy.py"), CHEATS / name)
    for name in ("side_stream.py", "thread_side.py", "uninit_reuse.py", "honest_two_streams.py")
] + [(CHEATS / "problems" / "convt1d_small.py", CHEATS / "honest_cuda_kernel.py")]


def machine_cpu_s() -> float:
    """CPU seconds every process on this machine has used (Linux /proc/stat): kbench's workers are not all
    its children (forked workers are the fork server's), and the builds' compilers are their grandchildren."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def timed_gpu_s(result) -> float:
    """Seconds of timed GPU work in an evaluation: every timing sample of every side (baselines too)."""
    timings = [result.reference_timing, result.candidate_timing] + [timing for _, timing in result.baselines]
    return sum(sum(timing.samples_ms) for timing in timings if timing is not None) / 1e3


def phase_seconds(result) -> dict[str, float]:
    """The worker's seconds per phase, from the result's phase_s ("checking 0.86; timing 0.79")."""
    phases = {}
    for part in filter(None, (piece.strip() for piece in result.phase_s.split(";"))):
        name, _, seconds = part.rpartition(" ")
        phases[name] = float(seconds)
    return phases


def median_phases(results) -> str:
    """Median seconds of each worker phase over `results`, and of the time outside the worker (its start and
    the hand-over of the job and result)."""
    names = list(dict.fromkeys(name for r in results for name in phase_seconds(r)))
    medians = {name: statistics.median(phase_seconds(r).get(name, 0.0) for r in results) for name in names}
    outside = statistics.median((r.wall_s or 0) - sum(phase_seconds(r).values()) for r in results)
    return "; ".join(f"{name} {value:.2f}" for name, value in medians.items()) + f"; outside the worker {outside:.2f}"


def interval(result) -> tuple[float, float]:
    """(start, end) of a result as Unix times: it was recorded at `time`, `wall_s` after it started."""
    end = datetime.fromisoformat(result.time).timestamp()
    return end - (result.wall_s or 0), end


def max_concurrent(results) -> int:
    """Largest number of evaluations whose intervals overlap."""
    events = []
    for result in results:
        start, end = interval(result)
        events += [(start, 1), (end, -1)]
    running = peak = 0
    for _, change in sorted(events):
        running += change
        peak = max(peak, running)
    return peak


def print_compiles(compiles, ranked: list[Path], cores: int) -> None:
    """The build phase's compilers (times from the slot server's start): how long each kind ran and waited,
    and the tail, from the last compile's start to the last compile's end, when cores can only idle."""
    done = [entry for entry in compiles if entry.granted_s is not None and entry.released_s is not None]
    if not done:
        return
    for kind in ("nvcc", "c++"):
        of_kind = [entry for entry in done if entry.kind == kind]
        if of_kind:
            seconds = sorted(entry.released_s - entry.granted_s for entry in of_kind)
            waits = [entry.granted_s - entry.queued_s for entry in of_kind]
            print(f"compiles, {kind}: {len(of_kind)}, seconds min {seconds[0]:.1f} median "
                  f"{statistics.median(seconds):.1f} max {seconds[-1]:.1f}; waited for a slot: median "
                  f"{statistics.median(waits):.1f} s, max {max(waits):.1f} s")
    first_asked = min(entry.queued_s for entry in done)
    last_start = max(entry.granted_s for entry in done)
    last_end = max(entry.released_s for entry in done)
    busy_in_tail = sum(min(entry.released_s, last_end) - max(entry.granted_s, last_start)
                       for entry in done if entry.released_s > last_start)
    print(f"compiles: first asked for a slot at {first_asked:.1f} s; the last started at {last_start:.1f} s and "
          f"the last ended at {last_end:.1f} s; in that tail {busy_in_tail / max(last_end - last_start, 1e-9):.1f} "
          f"of {cores} cores compiled on average")
    print("the last compiles to end (rank kind started ended seconds solution):")
    for entry in sorted(done, key=lambda entry: entry.released_s)[-8:]:
        name = str(ranked[entry.rank]) if entry.rank < len(ranked) else "?"
        print(f"  {entry.rank:4} {entry.kind:5} {entry.granted_s:7.1f} {entry.released_s:7.1f} "
              f"{entry.released_s - entry.granted_s:6.1f}  {name}")


def run(pairs, config, devices, executor=None) -> tuple[list, list, float, float]:
    """(results, build-phase results, wall seconds, CPU seconds the whole machine used meanwhile)."""
    cpu_before, started = machine_cpu_s(), time.monotonic()
    built = []
    results = run_pairs(pairs, config, devices=devices, on_built=built.append, executor=executor)
    return results, built, time.monotonic() - started, machine_cpu_s() - cpu_before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--csv", type=Path, default=None)
    args = parser.parse_args()
    devices = [f"cuda:{index}" for index in range(args.gpus)] or ["cpu"]
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="kbench-sweep-bench-"))
    config = RunConfig(device=devices[0], cache_dir=cache_dir)
    pairs, _ = find_pairs(Path("problems"), Path("solutions"))
    pairs += EXTRA_PAIRS
    cores = os.cpu_count() or 1

    ranked = [pairs[index][1] for index in plan_builds(pairs, config)[0]]  # the solution of each build rank
    executor = LocalExecutor()
    cold_start = time.time()
    cold, cold_built, cold_wall, cold_cpu = run(pairs, config, devices, executor)
    builds = [r for r in cold_built if r.build_s is not None]  # a build ran (not skipped, not failed early)
    build_cpu_s = sum(r.cpu_s or 0 for r in builds)
    evaluations = [r for r in cold if r.check is not None or r.status in ("runtime_error", "crashed", "timeout")]
    gpu_busy_s = sum(r.wall_s or 0 for r in evaluations) / len(devices)
    evaluation_cpu_s = sum(r.cpu_s or 0 for r in evaluations)
    floor_s = max(build_cpu_s / cores, gpu_busy_s, 1e-9)
    first_gpu_s = min((interval(r)[0] - cold_start for r in evaluations), default=0.0)
    last_build_s = max((interval(r)[1] - cold_start for r in builds), default=0.0)

    warm, _, warm_wall, _ = run(pairs, replace(config), devices[:1])
    overheads = [(r.wall_s or 0) - timed_gpu_s(r) for r in warm if r.check is not None]
    same = [(a.solution, a.status, b.status) for a, b in zip(cold, warm)]
    mismatched = [row for row in same if row[1] != row[2]]

    print(f"\n{len(pairs)} pairs, {len(devices)} device(s) ({torch.cuda.get_device_name(0) if devices[0] != 'cpu' else 'cpu'}),"
          f" {cores} cores")
    print(f"cold run: wall {cold_wall:.1f} s; {len(builds)} builds, build CPU {build_cpu_s:.1f} s (/ {cores} cores ="
          f" {build_cpu_s / cores:.1f} s); GPU evaluation time per device {gpu_busy_s:.1f} s;"
          f" evaluation workers' CPU {evaluation_cpu_s:.1f} s; the machine's CPU {cold_cpu:.1f} s")
    print(f"cold run: first evaluation started at {first_gpu_s:.1f} s, last build ended at {last_build_s:.1f} s;"
          f" GPU busy {gpu_busy_s:.1f} s of the {cold_wall - first_gpu_s:.1f} s after the first evaluation started")
    print(f"cold run: wall / max(build CPU / cores, GPU time) = {cold_wall / floor_s:.2f} (target <= 1.2)")
    print(f"cold run: most evaluations running at once: {max_concurrent(evaluations)}")
    print_compiles(executor.compiles, ranked, cores)
    print("cold run, build workers' median seconds per phase: " + median_phases(builds))
    print(f"warm run: wall {warm_wall:.1f} s; per evaluation outside timed GPU work: median "
          f"{statistics.median(overheads):.2f} s, max {max(overheads):.2f} s (target < 3 s)")
    print(f"verdicts equal with {len(devices)} GPU(s) and with 1: {not mismatched} {mismatched if mismatched else ''}")
    print("warm run, median seconds per phase: " + median_phases([r for r in warm if r.check is not None]))
    print(f"\n{'solution':56} {'status':14} {'cold wall s':>11} {'warm wall s':>11} {'outside timing s':>16}")
    for a, b in zip(cold, warm):
        outside = (b.wall_s or 0) - timed_gpu_s(b) if b.check is not None else float("nan")
        print(f"{a.solution[-56:]:56} {b.status:14} {a.wall_s or 0:>11.2f} {b.wall_s or 0:>11.2f} {outside:>16.2f}"
              f"  {b.phase_s}")
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["solution", "status_cold", "status_warm", "cold_wall_s", "warm_wall_s", "build_s"])
            for a, b in zip(cold, warm):
                writer.writerow([a.solution, a.status, b.status, a.wall_s, b.wall_s, a.build_s])
    return 0 if not mismatched else 1


if __name__ == "__main__":
    sys.exit(main())
