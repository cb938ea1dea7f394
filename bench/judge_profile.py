"""Where one evaluation's time goes, seen from the judge: its phases, the time it waited on each kind of
runner request, and the judge's own functions by cumulative time.

    PYTHONPATH=$PWD python3 bench/judge_profile.py PROBLEM SOLUTION [PROBLEM SOLUTION ...] [--device cuda:0]

Runs each evaluation the way a waiting worker does, under cProfile: a process of its own per pair primes what the
fork server primes and forks the judge, which forks its runners (a process with a thread beside the caller's
would start them as fresh interpreters, slower than a sweep's) and warms up before it is profiled. Build the
solutions first (a `kbench sweep` of them, same cache) or the profile is their build.
"""

from __future__ import annotations

import argparse
import cProfile
import collections
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kbench.extensions import import_extension_builder
from kbench.judge import worker
from kbench.config import RunConfig
from kbench.schedule.child import resolve_device
from kbench.schedule.job import Job
from kbench.judge.remote_process import RunnerProcess
from kbench.op_recording import import_op_recording


SETTLE_S = 3.0


def profile_one(problem: Path, solution: Path, device: str, top: int) -> None:
    waits: dict[str, list[float]] = collections.defaultdict(list)
    original_request = RunnerProcess.request

    def timed_request(self, message, on_progress=None):
        started = time.perf_counter()
        try:
            return original_request(self, message, on_progress)
        finally:
            waits[f"{message.get('op')}:{message.get('mode', '')}"].append(time.perf_counter() - started)
    RunnerProcess.request = timed_request
    with tempfile.TemporaryDirectory(prefix="kbench-profile-") as scratch:
        job = Job(problem_path=str(problem.resolve()), solution_path=str(solution.resolve()), device=device,
                  config=RunConfig(device=device), result_path=f"{scratch}/result.json",
                  progress_path=f"{scratch}/progress.json", log_path=f"{scratch}/log.txt")
        warm_started = time.perf_counter()
        runners = worker._warm_up(device)
        warm_s = time.perf_counter() - warm_started
        time.sleep(SETTLE_S)  # a waiting worker's runners finish warming up while the last evaluation runs
        profiler = cProfile.Profile()
        started = time.perf_counter()
        outcome = profiler.runcall(worker.run, job, runners)
        wall_s = time.perf_counter() - started
    RunnerProcess.request = original_request
    print(f"\n=== {solution}: {outcome.status} in {wall_s:.2f} s (warm-up before it {warm_s:.2f} s)")
    print("phases:", outcome.phase_s)
    print(f"{'runner request':24} {'count':>6} {'total s':>8} {'median ms':>10}")
    for name, seconds in sorted(waits.items(), key=lambda item: -sum(item[1])):
        ordered = sorted(seconds)
        print(f"{name:24} {len(seconds):6d} {sum(seconds):8.3f} {ordered[len(ordered) // 2] * 1e3:10.2f}")
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:12000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", type=Path, help="PROBLEM SOLUTION, repeated")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--top", type=int, default=35, help="functions to list by cumulative time")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a pair's own process
    arguments = parser.parse_args()
    if len(arguments.pairs) % 2:
        parser.error("give PROBLEM SOLUTION pairs")
    pairs = list(zip(arguments.pairs[::2], arguments.pairs[1::2]))
    if arguments.one:
        profile_forked(*pairs[0], arguments.device, arguments.top)
        return
    device = resolve_device(arguments.device)  # may start CUDA's driver here: judges are forked elsewhere
    for problem, solution in pairs:
        subprocess.run([sys.executable, __file__, str(problem), str(solution), "--device", device,
                        "--top", str(arguments.top), "--one"], check=False)


def profile_forked(problem: Path, solution: Path, device: str, top: int) -> None:
    """What the fork server does: prime, then fork the judge (a fork copies only the calling thread)."""
    import_op_recording()
    import_extension_builder()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            profile_one(problem, solution, device, top)
            code = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
