"""What a warm judge saves a training loop: two batches of candidates judged through one kbench.Judge (the
second batch new candidates, so builds are not what is measured), and the second batch again through the CLI.

    PYTHONPATH=$PWD python3 bench/warm_judge.py RUN_FOLDER KERNELBENCH_ROOT [--per-batch 16] [--device cuda:0]
                                                [--out DIR]

RUN_FOLDER holds KernelBench run files (level_<L>_problem_<ID>_sample_<S>_kernel.py), paired by level and id with
KERNELBENCH_ROOT's problems; the first 2 x --per-batch files that pair are used, as source text (a training
loop holds the text, not files). Every batch is built cold (a fresh build cache per batch). Prints, per batch,
its wall time, its longest build, its evaluations' summed time, and the GPU time per candidate not spent
evaluating (waiting for builds, and kbench's own overhead: an upper bound on the latter). --out DIR keeps the results:
DIR/warm_judge.csv (both batches) and DIR/cli.csv.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import kbench
from kbench.config import RunConfig
from kbench.solution import find_pairs


def own_seconds(results) -> tuple[float, float]:
    """(the longest build, the evaluations' summed wall time). In a batch the builds run first, in parallel
    (a result's build_s is its build's), and each result's wall_s is its evaluation's alone."""
    longest_build = max((result.build_s or 0.0 for result in results if not result.build_reused), default=0.0)
    evaluations = sum(result.wall_s or 0.0 for result in results)
    return longest_build, evaluations


def report(name: str, wall_s: float, results, devices: int = 1) -> None:
    """The batch's wall time beside its longest build and its evaluations. Builds run beside the evaluations,
    so what bounds kbench's own overhead is the time the GPUs did not evaluate: waiting for builds (the first
    one at least) plus whatever kbench spends between evaluations."""
    longest_build, evaluations = own_seconds(results)
    count = max(1, len(results))
    statuses = {}
    for result in results:
        statuses[result.status] = statuses.get(result.status, 0) + 1
    idle = max(0.0, wall_s - evaluations / devices) / count
    print(f"{name:24} {len(results):3d} candidates  wall {wall_s:7.1f} s  longest build {longest_build:6.1f} s  "
          f"evaluations {evaluations:6.1f} s on {devices} device(s)  GPU idle/candidate {idle:5.2f} s "
          f"(bounds the overhead)  {statuses}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_folder", type=Path)
    parser.add_argument("kernelbench_root", type=Path)
    parser.add_argument("--per-batch", type=int, default=16)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, help="a folder for the results CSVs (default: not kept)")
    arguments = parser.parse_args()
    pairs, _ = find_pairs(arguments.kernelbench_root, arguments.run_folder)
    pairs = pairs[:2 * arguments.per_batch]
    batches = [pairs[:arguments.per_batch], pairs[arguments.per_batch:]]
    with tempfile.TemporaryDirectory(prefix="kbench-warm-") as scratch:
        kept = arguments.out or Path(scratch)
        kept.mkdir(parents=True, exist_ok=True)
        config = RunConfig(device=arguments.device, cache_dir=Path(scratch) / "first")
        started = time.monotonic()
        with kbench.Judge(config, out=kept / "warm_judge.csv") as judge:
            print(f"judge started in {time.monotonic() - started:.1f} s")
            for index, batch in enumerate(batches):
                judge.config = replace(config, cache_dir=Path(scratch) / f"batch{index}")  # cold builds
                started = time.monotonic()
                results = judge.judge_many([(problem.read_text(), solution.read_text()) for problem, solution in batch])
                report(f"warm judge, batch {index + 1}", time.monotonic() - started, results, len(judge.devices))
        second = Path(scratch) / "second"
        second.mkdir()
        for problem, solution in batches[1]:
            (second / solution.name).write_text(solution.read_text())
        started = time.monotonic()
        completed = subprocess.run([sys.executable, "-m", "kbench", "sweep", "--problems", str(arguments.kernelbench_root),
                                    "--solutions", str(second), "--device", arguments.device, "--cache-dir",
                                    str(Path(scratch) / "cli"), "--out", str(kept / "cli.csv"), "--json"],
                                   capture_output=True, text=True)
        wall_s = time.monotonic() - started
        rows = kbench.read_results(kept / "cli.csv") if (kept / "cli.csv").exists() else None
        print(f"{'CLI sweep, batch 2':24} {0 if rows is None else len(rows):3d} candidates  wall {wall_s:7.1f} s  "
              f"(exit {completed.returncode})")


if __name__ == "__main__":
    main()
