"""What moving the candidate into a runner process of its own costs, and whether it changed any verdict.

    PYTHONPATH=$PWD python3 bench/split_cost.py BEFORE.csv AFTER.csv

BEFORE and AFTER are results CSVs of the same sweep (same solutions, problems, device and settings, warm build
cache) by kbench before and after the split (bench/split_check.sh makes both on a GPU machine). Prints, per
solution, the status and speedup of each and the evaluation's wall time (the parent's view, builds cached),
then the totals: the split's cost is AFTER's total wall time over BEFORE's.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path


BUILD_FAILURES = ("compile_error", "load_error")  # rows of the build phase, not of an evaluation


def latest_rows(path: Path) -> dict[str, dict]:
    """By the solution's path from its `solutions` folder (the two runs may name them from other places)."""
    rows = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            parts = Path(row["solution"]).parts
            key = "/".join(parts[parts.index("solutions"):] if "solutions" in parts else parts[-2:])
            rows[key] = row
    return rows


def compared(old: dict, new: dict) -> bool:
    """Whether a pair's wall times count: an evaluation in both runs, with the same status (a status that changed
    ended the evaluation elsewhere)."""
    return old["status"] == new["status"] and old["status"] not in BUILD_FAILURES


def number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def short(solution: str) -> str:
    parts = Path(solution).parts
    return "/".join(parts[-2:])[-34:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    arguments = parser.parse_args()
    before, after = latest_rows(arguments.before), latest_rows(arguments.after)
    print(f"{'solution':34} {'status before/after':23} {'speedup b/a':13} {'wall s b/a':12}")
    total_before = total_after = 0.0
    changed = 0
    for solution in sorted(set(before) & set(after)):
        old, new = before[solution], after[solution]
        evaluated = compared(old, new)
        wall_old, wall_new = number(old["wall_s"]) or 0.0, number(new["wall_s"]) or 0.0
        total_before += wall_old if evaluated else 0.0
        total_after += wall_new if evaluated else 0.0
        same = old["status"] == new["status"]
        changed += not same
        speedups = "/".join(f"{value:.2f}" if value is not None else "-"
                            for value in (number(old["speedup"]), number(new["speedup"])))
        mark = "" if same else "  <- status changed"
        print(f"{short(solution):34} {old['status'] + '/' + new['status']:23} {speedups:13} "
              f"{wall_old:5.1f}/{wall_new:<5.1f}{mark}")
    only = set(before) ^ set(after)
    print(f"\n{len(set(before) & set(after))} solutions in both ({len(only)} in one only); "
          f"{changed} changed status")
    if total_before:
        print(f"wall time of the evaluations with the same status: {total_before:.1f} s before, "
              f"{total_after:.1f} s after ({total_after / total_before - 1:+.1%})")
    evaluated = [key for key in sorted(set(before) & set(after)) if compared(before[key], after[key])]
    first = first_evaluations(before) | first_evaluations(after)
    print_without_first(evaluated, first, before, after)
    print_at_equal_sampling(evaluated, first, before, after)
    print_phases([before[key] for key in evaluated], [after[key] for key in evaluated])


def first_evaluations(rows: dict[str, dict]) -> set[str]:
    """The evaluation each sweep (run_id) finished first: the one that waited for the sweep's first worker to start
    (a cost of the sweep, not of every evaluation)."""
    first: dict[str, tuple[str, str]] = {}
    for key, row in rows.items():
        if row["status"] in BUILD_FAILURES:
            continue
        run = row.get("run_id", "")
        if run not in first or row["time"] < first[run][0]:
            first[run] = (row["time"], key)
    return {key for _, key in first.values()}


def print_without_first(evaluated: list[str], first: set[str], before: dict[str, dict],
                        after: dict[str, dict]) -> None:
    kept = [key for key in evaluated if key not in first]
    old = sum(number(before[key]["wall_s"]) or 0.0 for key in kept)
    new = sum(number(after[key]["wall_s"]) or 0.0 for key in kept)
    if old and len(kept) < len(evaluated):
        print(f"without each sweep's first evaluation ({len(kept)} left): {old:.1f} s before, {new:.1f} s after "
              f"({new / old - 1:+.1%}, {(new - old) / len(kept):+.2f} s each)")


TIMING_LOOP = ("timing", "timing again")  # the phases whose length is the number of samples taken


def print_at_equal_sampling(evaluated: list[str], first: set[str], before: dict[str, dict],
                            after: dict[str, dict]) -> None:
    """The timing loop stops once its estimate settles, so how many samples it takes follows the two sides' noise
    in that run, not the code. At equal sampling, each evaluation after the split costs its time outside the loop
    plus its loop's time per sample times the samples taken before it."""
    for label, keys in (("all", evaluated), ("without the first", [key for key in evaluated if key not in first])):
        old = new = outside_old = outside_new = 0.0
        for key in keys:
            (outside_b, loop_b, samples_b), (outside_a, loop_a, samples_a) = (
                sampling(rows[key]) for rows in (before, after))
            old += outside_b + loop_b
            new += outside_a + (loop_a * samples_b / samples_a if samples_a else loop_a)
            outside_old, outside_new = outside_old + outside_b, outside_new + outside_a
        if old and outside_old:
            print(f"at the samples taken before, {label} ({len(keys)}): {old:.1f} s before, {new:.1f} s after "
                  f"({new / old - 1:+.1%}); outside the timing loop {outside_old:.1f} s, {outside_new:.1f} s "
                  f"({outside_new / outside_old - 1:+.1%})")


def sampling(row: dict) -> tuple[float, float, float]:
    """(seconds outside the timing loop, seconds in it, samples of both sides)."""
    seconds = phase_seconds(row)
    loop = sum(seconds.get(name, 0.0) for name in TIMING_LOOP)
    samples = (number(row["ref_samples"]) or 0.0) + (number(row["cand_samples"]) or 0.0)
    return (number(row["wall_s"]) or 0.0) - loop, loop, samples


# Entries of phase_s that are parts of a phase (or, for "ending the worker", of no phase: the parent's view of the
# worker's exit), not phases: left out of the sum of the phases.
PARTS = ("guard:", "making fresh inputs", "stopping the runners", "ending the worker")


def phase_seconds(row: dict) -> dict[str, float]:
    """phase_s ("checking 1.20; timing 0.50; ...") as seconds by name."""
    seconds: dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in (row.get("phase_s") or "").split(";"))):
        name, _, value = entry.rpartition(" ")
        if number(value) is not None:
            seconds[name] = seconds.get(name, 0.0) + float(value)
    return seconds


def print_phases(before: list[dict], after: list[dict]) -> None:
    """Seconds per phase summed over the evaluations, and what no phase holds (the row's wall time less its
    phases): where the difference goes."""
    totals = []
    for rows in (before, after):
        total: dict[str, float] = {}
        for row in rows:
            seconds = phase_seconds(row)
            for name, value in seconds.items():
                total[name] = total.get(name, 0.0) + value
            phases = sum(value for name, value in seconds.items() if not name.startswith(PARTS))
            total["outside every phase"] = total.get("outside every phase", 0.0) + \
                (number(row["wall_s"]) or 0.0) - phases
        totals.append(total)
    count = max(1, len(after))
    print(f"\n{'phase (seconds summed)':40} {'before':>8} {'after':>8} {'per evaluation':>15}")
    for name in dict.fromkeys([*totals[0], *totals[1]]):
        old, new = totals[0].get(name, 0.0), totals[1].get(name, 0.0)
        print(f"{name[:40]:40} {old:8.2f} {new:8.2f} {(new - old) / count:+15.3f}")


if __name__ == "__main__":
    main()
