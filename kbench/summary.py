"""Summaries of a results CSV: best per problem, counts per status, fast_p, geometric-mean speedup.

Pure functions over pandas DataFrames; report.py renders them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kbench import stats

# fast_p thresholds: the share of problems with a correct solution faster than p times the reference.
FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
CORRECT = "correct"


def load(path: Path, run_id: str | None = None) -> pd.DataFrame:
    """Read a results CSV; keep each (problem, solution)'s latest row (a re-run replaces the old one)."""
    frame = pd.read_csv(path, dtype={"solution_hash": str, "problem_hash": str, "settings": str, "run_id": str})
    if run_id:
        frame = frame[frame["run_id"] == run_id]
    if frame.empty:
        return frame
    return frame.drop_duplicates(subset=["problem", "solution"], keep="last").reset_index(drop=True)


def best_per_problem(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per problem: its fastest correct solution (or none), and how many solutions were judged."""
    rows = []
    for problem, group in frame.groupby("problem", sort=True):
        correct = group[group["status"] == CORRECT]
        timed = correct.dropna(subset=["speedup"])
        best = timed.loc[timed["speedup"].idxmax()] if not timed.empty else (
            correct.iloc[0] if not correct.empty else None)
        rows.append({
            "problem": problem,
            "solutions": len(group),
            "correct": len(correct),
            "best_solution": best["solution"] if best is not None else None,
            "best_speedup": float(best["speedup"]) if best is not None and pd.notna(best["speedup"]) else None,
            "ref_median_ms": float(best["ref_median_ms"]) if best is not None and pd.notna(best["ref_median_ms"]) else None,
            "cand_median_ms": (float(best["cand_median_ms"])
                               if best is not None and pd.notna(best["cand_median_ms"]) else None),
        })
    frame = pd.DataFrame(rows, columns=["problem", "solutions", "correct", "best_solution", "best_speedup",
                                        "ref_median_ms", "cand_median_ms"])
    return frame.astype(object).where(frame.notna(), None)  # missing is None, not NaN


def status_counts(frame: pd.DataFrame) -> dict[str, int]:
    return {status: int(count) for status, count in frame["status"].value_counts().sort_index().items()}


def fast_p(frame: pd.DataFrame, thresholds=FAST_P) -> dict[float, float]:
    """For each p: problems with a correct solution whose speedup > p, over all problems in the frame.

    fast_0 is the share of problems with any correct solution (timed or not).
    """
    problems = frame["problem"].nunique()
    if problems == 0:
        return {p: 0.0 for p in thresholds}
    correct = frame[frame["status"] == CORRECT]
    best = correct.groupby("problem")["speedup"].max()
    result = {}
    for p in thresholds:
        solved = len(correct["problem"].unique()) if p == 0 else int((best > p).sum())
        result[p] = solved / problems
    return result


def geometric_mean_speedup(frame: pd.DataFrame) -> float | None:
    speedups = frame.loc[frame["status"] == CORRECT, "speedup"].dropna().tolist()
    return stats.geometric_mean(speedups)


@dataclass(frozen=True)
class Summary:
    results: int                     # rows summarised (latest per problem and solution)
    problems: int
    status_counts: dict
    fast_p: dict
    geometric_mean_speedup: float | None
    best: pd.DataFrame

    def to_dict(self) -> dict:
        return {
            "results": self.results, "problems": self.problems, "status_counts": self.status_counts,
            "fast_p": {f"fast_{p:g}": value for p, value in self.fast_p.items()},
            "geometric_mean_speedup": self.geometric_mean_speedup,
            "best_per_problem": [{key: (None if isinstance(value, float) and math.isnan(value) else value)
                                  for key, value in row.items()} for row in self.best.to_dict("records")],
        }


def summarise(frame: pd.DataFrame) -> Summary:
    """The whole summary of a non-empty results frame."""
    return Summary(results=len(frame), problems=int(frame["problem"].nunique()), status_counts=status_counts(frame),
                   fast_p=fast_p(frame), geometric_mean_speedup=geometric_mean_speedup(frame),
                   best=best_per_problem(frame))


def compare(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Problem by problem: best speedup and correct count in each run, and the ratio after/before."""
    left = best_per_problem(before)[["problem", "correct", "best_speedup"]]
    right = best_per_problem(after)[["problem", "correct", "best_speedup"]]
    merged = left.merge(right, on="problem", how="outer", suffixes=("_a", "_b")).sort_values("problem")
    merged["ratio_b_over_a"] = (pd.to_numeric(merged["best_speedup_b"], errors="coerce")
                                / pd.to_numeric(merged["best_speedup_a"], errors="coerce"))
    return merged.reset_index(drop=True)
