"""Where an evaluation's time goes, function by function: one evaluation per case under cProfile.

    PYTHONPATH=$PWD python3 bench/guard_profile.py [--guards on|off] [--top 45] [PROBLEM SOLUTION]

Each evaluation runs the worker's own code (kbench.worker.run) in a fresh process warmed up as a
waiting worker is, with builds cached first; it prints the outcome, the worker's phases, and the
functions with the most cumulative time (kbench's and the torch calls they make). Use it to find which
guard to make cheaper; bench/guard_overhead.py gives the end-to-end figure.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from kbench.config import RunConfig

CASES = [
    ("problems/convt1d.py", "solutions/convt1d.py"),
    ("problems/convt2d_asym.py", "solutions/convt2d_asym/general.py"),
    ("tests/fixtures/cheats/problems/convt1d_small.py", "tests/fixtures/cheats/honest_cuda_kernel.py"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="PROBLEM SOLUTION pairs (default: three of the suite's)")
    parser.add_argument("--guards", choices=("on", "off"), default="on")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child: one evaluation
    args = parser.parse_args()
    pairs = list(zip(args.cases[::2], args.cases[1::2])) or CASES
    if args.one:
        return _profile_one(*pairs[0], args)
    from kbench.runner import evaluate
    for problem, solution in pairs:
        config = RunConfig(device=args.device, sweep=0)
        evaluate(Path(problem), Path(solution), replace(config, time=False, trials=1), build_only=True)
        print(f"\n=== {solution} (guards {args.guards})", flush=True)
        subprocess.run([sys.executable, __file__, "--one", "--guards", args.guards, "--device", args.device,
                        "--top", str(args.top), problem, solution], check=False)
    return 0


def _profile_one(problem: str, solution: str, args) -> int:
    from kbench import worker
    from kbench.job import Job
    from kbench.runner import resolve_device
    device = resolve_device(args.device)
    worker._warm_up(device)
    config = RunConfig(device=args.device, sweep=0, guards=args.guards == "on")
    with tempfile.TemporaryDirectory(prefix="kbench-profile-") as scratch:
        job = Job(problem_path=str(Path(problem).resolve()), solution_path=str(Path(solution).resolve()),
                  device=device, config=config, result_path=f"{scratch}/result.json",
                  progress_path=f"{scratch}/progress.json", log_path=f"{scratch}/log.txt")
        profiler = cProfile.Profile()
        outcome = profiler.runcall(worker.run, job)
    print(f"{outcome.status} {','.join(outcome.flags)} {outcome.message[:200]}")
    print(f"phases: {outcome.phase_s}")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
