"""KernelBench problems each submitted as its own ModelNew (the reference's code, renamed): every speedup should
read 1.00x, and no row should carry `unverified_time` (GPU; on a CPU it runs at reduced sizes).

    python bench/self_candidates.py --kernelbench ../shared/kernelbench --levels 1:1-30 2:1-20 --out DIR [--code TREE]

Writes DIR/run (a KernelBench run folder), sweeps it with `--sweep 0` into DIR/self.csv with the kbench of TREE
(default this checkout: `--code` times another tree's kbench on the same files), and prints one line per row and
a summary: rows within 2% of 1.00x, rows with `unverified_time`, the median and total evaluation wall time.
`--report-only` prints the table of an existing CSV again.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent


def problem_id(path: Path) -> int:
    return int(path.name.split("_", 1)[0])


def parse_levels(items: list[str]) -> dict[int, range]:
    """"1:1-30" -> {1: range(1, 31)}."""
    chosen = {}
    for item in items:
        level, span = item.split(":")
        first, last = span.split("-")
        chosen[int(level)] = range(int(first), int(last) + 1)
    return chosen


def write_run_folder(kernelbench: Path, levels: dict[int, range], run: Path) -> None:
    for level, ids in levels.items():
        folder = run / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        for path in sorted((kernelbench / f"level{level}").glob("[0-9]*_*.py"), key=problem_id):
            if problem_id(path) in ids:
                source = re.sub(r"\bModel\b", "ModelNew", path.read_text())
                (folder / f"level_{level}_problem_{problem_id(path)}_sample_0_kernel.py").write_text(source)


def sweep(kernelbench: Path, levels: dict[int, range], run: Path, csv: Path, code: Path, extra: list[str]) -> None:
    # The tree's kbench first (and run from it: `python -m` puts the working folder ahead of PYTHONPATH).
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")])))
    for level in levels:
        subprocess.run([sys.executable, "-m", "kbench", "sweep", "--problems", str(kernelbench.resolve() / f"level{level}"),
                        "--solutions", str(run.resolve() / f"level{level}"), "--out", str(csv.resolve()), "--sweep", "0",
                        *extra], cwd=code, env=environment, check=False)


def report(frame: pd.DataFrame) -> None:
    frame = frame.assign(flags=frame["flags"].fillna(""), name=frame["solution"].map(lambda p: Path(p).name))
    print(f"{'solution':<40} {'status':<10} {'speedup':>8} {'ref ms':>9} {'wall s':>7}  flags")
    for _, row in frame.iterrows():
        speedup = f"{row['speedup']:.3f}" if pd.notna(row.get("speedup")) else "-"
        reference = f"{row['ref_median_ms']:.4f}" if pd.notna(row.get("ref_median_ms")) else "-"
        print(f"{row['name'][:40]:<40} {row['status']:<10} {speedup:>8} {reference:>9} {row['wall_s']:>7.1f}  "
              f"{row['flags']}")
    correct = frame[frame["status"] == "correct"]
    near = ((correct["speedup"] - 1).abs() <= 0.02).sum()
    unverified = frame["flags"].str.contains("unverified_time").sum()
    print(f"\n{len(frame)} rows, {len(correct)} correct; within 2% of 1.00x: {near}/{len(correct)}; "
          f"unverified_time: {unverified}; speedup range {correct['speedup'].min():.3f}-{correct['speedup'].max():.3f}")
    print(f"evaluation wall time: median {frame['wall_s'].median():.2f} s, total {frame['wall_s'].sum():.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--levels", nargs="+", default=["1:1-30", "2:1-20"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--code", type=Path, default=REPO, help="the tree whose kbench runs (default: this one)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("kbench_args", nargs="*", help="more options for kbench sweep (after --)")
    arguments = parser.parse_args()
    levels = parse_levels(arguments.levels)
    csv = arguments.out / "self.csv"
    if not arguments.report_only:
        write_run_folder(arguments.kernelbench, levels, arguments.out / "run")
        sweep(arguments.kernelbench, levels, arguments.out / "run", csv, arguments.code.resolve(),
              arguments.kbench_args)
    report(pd.read_csv(csv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
