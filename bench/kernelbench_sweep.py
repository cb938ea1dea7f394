"""A sweep of KernelBench problems (levels 1-3, official sizes) with candidates of kbench's own, checking that
every row gets the verdict it should (GPU).

Candidates, written as a KernelBench run folder (level_<L>_problem_<ID>_sample_<S>_kernel.py):
- sample 0 of every chosen problem: the reference itself as ModelNew (a plain PyTorch rewrite): correct;
- bench/kernelbench_candidates/*.py as sample 1 of their problem: CUDA kernels that lose the CUDA context
  in the sweep or in the trials, and a float64 computation more accurate than the float32 reference
  (each file's docstring says the verdict it expects).

    python bench/kernelbench_sweep.py --kernelbench ../shared/kernelbench --per-level 40 40 20 --out DIR

Prints the status counts, every row whose verdict is not the expected one, the sweep configurations
skipped, and the time the float64 arbitration added (the "float64 truth" entries of phase_s).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
CANDIDATES = REPO / "bench" / "kernelbench_candidates"
# candidate file -> (level, problem id, expected status, expected flag or "")
DESIGNED = {
    "relu_oob_at_other_sizes.py": (1, 19, "correct", "sweep_failed"),
    "relu_breaks_context_in_trials.py": (1, 19, "runtime_error", ""),
    "matmul_sum_float64.py": (2, 18, "correct", ""),
}


def problem_id(path: Path) -> int:
    return int(path.name.split("_", 1)[0])


def chosen(folder: Path, count: int, must: set[int]) -> list[Path]:
    """`count` problems spread evenly over the level's ids, plus those the designed candidates need."""
    files = sorted(folder.glob("[0-9]*_*.py"), key=problem_id)
    step = max(1, len(files) // max(1, count))
    picked = files[::step][:count]
    return sorted(set(picked) | {path for path in files if problem_id(path) in must}, key=problem_id)


def write_run_folder(kernelbench: Path, per_level: list[int], run: Path) -> dict[str, tuple[str, str]]:
    """The run folder's files, and what each should get: {file name: (status, flag)}."""
    expected = {}
    for level, count in zip((1, 2, 3), per_level):
        folder = run / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        must = {problem for name, (lv, problem, _, _) in DESIGNED.items() if lv == level}
        for path in chosen(kernelbench / f"level{level}", count, must):
            name = f"level_{level}_problem_{problem_id(path)}_sample_0_kernel.py"
            source = re.sub(r"\bclass Model\b", "class ModelNew", path.read_text())
            (folder / name).write_text(source.replace("super(Model, self)", "super(ModelNew, self)"))
            expected[name] = ("correct", "")
        for sample, (candidate, (lv, problem, status, flag)) in enumerate(
                (item for item in DESIGNED.items() if item[1][0] == level), start=1):
            name = f"level_{level}_problem_{problem}_sample_{sample}_kernel.py"
            (folder / name).write_text((CANDIDATES / candidate).read_text())
            expected[name] = (status, flag)
    return expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--per-level", type=int, nargs=3, default=[40, 40, 20])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sweep", type=int, default=4)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3], help="levels to run now (the CSV "
                        "accumulates: run the levels in several calls, then --report-only)")
    parser.add_argument("--report-only", action="store_true")
    arguments = parser.parse_args()
    run = arguments.out / "run"
    expected = write_run_folder(arguments.kernelbench, arguments.per_level, run)
    csv = arguments.out / "kernelbench_sweep.csv"
    for level in [] if arguments.report_only else arguments.levels:
        subprocess.run([sys.executable, "-m", "kbench", "sweep", "--problems", str(arguments.kernelbench / f"level{level}"),
                        "--solutions", str(run / f"level{level}"), "--out", str(csv), "--sweep", str(arguments.sweep),
                        "--time-budget", "0.5"], cwd=REPO, check=False)
    return report(pd.read_csv(csv), expected)


def report(frame: pd.DataFrame, expected: dict[str, tuple[str, str]]) -> int:
    frame["name"] = frame["solution"].map(lambda path: Path(path).name)
    frame["flags"] = frame["flags"].fillna("")
    print(f"{len(frame)} rows; status counts: {dict(Counter(frame['status']))}")
    wrong = []
    for _, row in frame.iterrows():
        status, flag = expected[row["name"]]
        if row["status"] != status or (flag and flag not in row["flags"].split(";")):
            wrong.append(f"{row['name']}: {row['status']} [{row['flags']}] expected {status} {flag}: "
                         f"{str(row['message'])[:200]}")
    crashed = frame[frame["status"] == "crashed"]
    print(f"rows not as intended: {len(wrong)}; crashed: {len(crashed)}")
    for line in wrong:
        print("  " + line)
    truth = frame["phase_s"].fillna("").map(lambda text: sum(float(part.rsplit(" ", 1)[1])
                                                                for part in text.split("; ")
                                                                if part.startswith("float64 truth ")))
    decided = frame["truth_trials"].fillna(0) if "truth_trials" in frame else pd.Series(dtype=float)
    print(f"float64 arbitration: {truth.sum():.2f} s over {int((truth > 0).sum())} evaluations "
          f"(trials it decided: {int(decided.sum())}); whole evaluations: {frame['wall_s'].sum():.1f} s")
    print(f"sweep configurations run {int(frame['sweep_run'].fillna(0).sum())}, "
          f"skipped {int(frame['sweep_skipped'].fillna(0).sum())}")
    for _, row in frame.iterrows():
        if row["name"] in {name for name, (status, flag) in expected.items() if (status, flag) != ("correct", "")} \
                or row["name"].endswith("_sample_1_kernel.py"):
            print(f"  designed {row['name']}: {row['status']} [{row['flags']}] {str(row['message'])[:160]}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
