"""The reference's time alone against its time in the timing loop, per evaluation (GPU).

    PYTHONPATH=$PWD python3 bench/alone_vs_loop.py [--pairs N] [--time-budget S] [WORKLOAD ...]

Evaluates each workload of bench/workloads (default: relu_medium) as its own candidate, `--pairs` times, and prints
the reference's median time alone (timed before the candidate is imported: reference_side.time_alone) beside its
median in the timing loop, with the log's lines on both's batches.
`slowed_reference` compares the two, so they should agree (the GPU test
`test_the_reference_s_time_alone_reads_its_time_in_the_timing_loop_on_short_calls` asks 0.7-1.4)."""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from kbench.config import RunConfig
from kbench.schedule.scheduler import run_pairs

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=["relu_medium"])
    parser.add_argument("--pairs", type=int, default=2, help="evaluations of each workload")
    parser.add_argument("--time-budget", type=float, default=1.0)
    arguments = parser.parse_args()
    config = RunConfig(device="cuda", cache_dir=Path(tempfile.mkdtemp(prefix="kbench-alone-")),
                       time_budget_s=arguments.time_budget, sweep=0)
    pairs = [(WORKLOADS / "problems" / f"{name}.py", WORKLOADS / "solutions" / f"{name}.py")
             for name in arguments.workloads for _ in range(arguments.pairs)]
    print(f"{'workload':<14} {'status':<10} {'speedup':>8} {'alone ms':>10} {'loop ms':>10} {'ratio':>6}")
    for (problem, _), result in zip(pairs, run_pairs(pairs, config, devices=["cuda:0"])):
        if result.reference_alone is None or result.reference_timing is None:
            why = "no time alone: taken on a GPU, with guards" if result.reference_timing else result.message[:60]
            print(f"{problem.stem:<14} {result.status:<10} ({why})")
            continue
        alone, loop = result.reference_alone.median_ms, result.reference_timing.median_ms
        print(f"{problem.stem:<14} {result.status:<10} {result.speedup:8.3f} {alone:10.4f} {loop:10.4f} "
              f"{alone / loop:6.2f}", flush=True)
        for line in Path(result.log_path).read_text(errors="replace").splitlines():  # its batches and fixed cost
            if line.startswith(("kbench: the reference alone:", "kbench: judge's clock:")):
                print("    " + line.removeprefix("kbench: "))


if __name__ == "__main__":
    main()
