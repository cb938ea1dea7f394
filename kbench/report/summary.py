"""Summaries of a results CSV: best per problem, counts per status, failures, fast_p, geometric-mean speedup.

Pure functions over pandas DataFrames; report.py renders them.

fast_p comes two ways. KernelBench's: the share of problems with a `correct` solution, run at the
official sizes, faster than p times the reference. kbench's own, the headline ("trusted"): the same,
counting only correct results that raised no flag but `throttled` (a flag about the measurement, not
the candidate): no sweep_failed, calls_reference_op, low_precision, weak_check or any later one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kbench import flags, stats
from kbench.results import Status
from kbench.names import natural_key
from kbench.solution import folder_level

# fast_p thresholds: the share of problems with a correct solution faster than p times the reference.
FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
# Flags that leave a result in trusted fast_p (throttled: the GPU, not the candidate); every other flag keeps it out.
HARMLESS_FLAGS = frozenset({flags.THROTTLED})
BEST_COLUMNS = ["problem", "solutions", "correct", "best_solution", "best_speedup", "ref_median_ms",
                "cand_median_ms", "best_flags", "outcome", "level"]
FAILURE_COLUMNS = ["status", "problem", "solution", "reason"]


# Columns of text that can look like numbers, or be empty throughout: read as text.
TEXT_COLUMNS = ("solution_hash", "problem_hash", "settings", "run_id", "flags", "sizes", "message", "first_mismatch",
                "sweep_failure")


def read(path) -> pd.DataFrame:
    """Every row of a results CSV, its text columns as text."""
    return pd.read_csv(path, dtype=dict.fromkeys(TEXT_COLUMNS, str))


def latest(frame: pd.DataFrame) -> pd.DataFrame:
    """Each (problem, solution)'s latest row: a re-run replaces the old one."""
    if frame.empty:
        return frame
    return frame.drop_duplicates(subset=["problem", "solution"], keep="last").reset_index(drop=True)


# Columns every results CSV has: without them a file is not one.
REQUIRED_COLUMNS = ("problem", "solution", "status")


def load(path: Path, run_id: str | None = None) -> pd.DataFrame:
    """Read a results CSV; keep each (problem, solution)'s latest row (of run `run_id`, when given). A ValueError
    when it is not one."""
    frame = read(path)
    missing = [column for column in REQUIRED_COLUMNS if column not in frame]
    if missing:
        raise ValueError(f"no {', '.join(missing)} column{'s' * (len(missing) > 1)}")
    if run_id and "run_id" not in frame:
        raise ValueError("no run_id column")
    if run_id:
        frame = frame[frame["run_id"] == run_id]
    return latest(frame)


def first_line(error: BaseException) -> str:
    """An error's first line: what pandas says of a file it cannot parse, without the rest."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _text(row, column: str) -> str:
    value = row.get(column) if hasattr(row, "get") else None
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()


def disqualifying_flags(row) -> list[str]:
    """The row's flags (the CSV's `;`-separated `flags` column) except those about the measurement."""
    return _disqualifying(_text(row, "flags"))


def _disqualifying(flags_text: str) -> list[str]:
    """The flags of a `flags` cell that keep a correct result out of trusted fast_p: all but HARMLESS_FLAGS. The
    one writing of that rule, for disqualifying_flags (one row) and trusted_mask (a frame)."""
    return [flag for flag in flags_text.split(";") if flag and flag not in HARMLESS_FLAGS]


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A text column, empty strings where the CSV has none (older CSVs lack flags or sizes)."""
    if name not in frame:
        return pd.Series("", index=frame.index)
    values = frame[name]
    return values.astype(object).where(values.notna(), "").astype(str).str.strip()  # an all-empty column is float


def official_mask(frame: pd.DataFrame) -> pd.Series:
    """Rows run at the problem's official sizes (the `sizes` column lists overrides; empty is official)."""
    return _column(frame, "sizes") == ""


def trusted_mask(frame: pd.DataFrame) -> pd.Series:
    """Correct rows with no flag but harmless ones (none that disqualifying_flags would name)."""
    flagged = _column(frame, "flags").map(lambda text: bool(_disqualifying(text)))
    return (frame["status"] == Status.CORRECT) & ~flagged


def best_per_problem(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per problem (natural order): its fastest trusted solution (trusted_mask: correct, no flag but
    throttled), how many were judged and were correct, and its outcome: faster, slower, untimed, flagged (correct
    solutions, none trusted: their flags in best_flags, no best) or the most common failing status when no solution
    is correct."""
    rows = [_best_row(problem, group) for problem, group in frame.groupby("problem", sort=False)]
    rows.sort(key=lambda row: natural_key(row["problem"]))
    best = pd.DataFrame(rows, columns=BEST_COLUMNS)
    best["level"] = best["level"].astype("Int64")  # whole numbers (2, not 2.0) beside problems of no level
    return best.astype(object).where(best.notna(), None)  # missing is None, not NaN


def _best_row(problem: str, group: pd.DataFrame) -> dict:
    correct = group[group["status"] == Status.CORRECT]
    trusted = group[trusted_mask(group)]
    timed = trusted.dropna(subset=["speedup"])
    best = timed.loc[timed["speedup"].idxmax()] if not timed.empty else (
        trusted.iloc[0] if not trusted.empty else None)
    row = {"problem": problem, "solutions": len(group), "correct": len(correct), "level": _level(group)}
    if best is None and not correct.empty:
        raised = dict.fromkeys(flag for _, each in correct.iterrows() for flag in disqualifying_flags(each))
        return {**row, "best_flags": ";".join(raised), "outcome": "flagged"}
    if best is None:
        return {**row, "outcome": group["status"].value_counts().idxmax()}
    number = lambda column: float(best[column]) if column in best and pd.notna(best[column]) else None
    speedup = number("speedup")
    outcome = "untimed" if speedup is None else "faster" if speedup >= 1 else "slower"
    return {**row, "best_solution": best["solution"], "best_speedup": speedup,
            "ref_median_ms": number("ref_median_ms"), "cand_median_ms": number("cand_median_ms"),
            "best_flags": None, "outcome": outcome}


def _level(group: pd.DataFrame) -> int | None:
    """The KernelBench level of the problem's folder (level2/ -> 2), None when it names none."""
    paths = [path for path in _column(group, "problem_path") if path]
    return folder_level(Path(paths[0]).parent) if paths else None


def status_counts(frame: pd.DataFrame) -> dict[str, int]:
    return {status: int(count) for status, count in frame["status"].value_counts().sort_index().items()}


def fast_p(frame: pd.DataFrame, counted: pd.Series | None = None, thresholds=FAST_P) -> dict[float, float]:
    """For each p: problems with a counted solution whose speedup > p, over all problems in the frame.

    `counted` selects the rows that may count (default: correct ones); fast_0 is the share of problems
    with any counted solution (timed or not).
    """
    problems = frame["problem"].nunique()
    if problems == 0:
        return {p: 0.0 for p in thresholds}
    counted = (frame["status"] == Status.CORRECT) if counted is None else counted
    eligible = frame[counted]
    best = eligible.groupby("problem")["speedup"].max()
    return {p: (eligible["problem"].nunique() if p == 0 else int((best > p).sum())) / problems
            for p in thresholds}


def fast_p_kernelbench(frame: pd.DataFrame) -> dict[float, float]:
    """KernelBench's fast_p: correct, at the official sizes."""
    return fast_p(frame, (frame["status"] == Status.CORRECT) & official_mask(frame))


def fast_p_trusted(frame: pd.DataFrame) -> dict[float, float]:
    """kbench's headline fast_p: correct, at the official sizes, no flag but throttled."""
    return fast_p(frame, trusted_mask(frame) & official_mask(frame))


def geometric_mean_speedup(frame: pd.DataFrame) -> float | None:
    speedups = frame.loc[frame["status"] == Status.CORRECT, "speedup"].dropna().tolist()
    return stats.geometric_mean(speedups)


def failures(frame: pd.DataFrame) -> pd.DataFrame:
    """Every solution that is not correct, and every correct one with a disqualifying flag (status
    `correct`, the flags in its reason): status, problem, solution and a one-line reason.
    Grouped by status (most frequent first), problems in natural order."""
    rows = [{"status": row["status"], "problem": row["problem"], "solution": row["solution"],
             "reason": failure_reason(row)}
            for row in frame.to_dict("records") if row["status"] != Status.CORRECT or disqualifying_flags(row)]
    table = pd.DataFrame(rows, columns=FAILURE_COLUMNS)
    if table.empty:
        return table
    frequency = table["status"].map(table["status"].value_counts())
    order = sorted(range(len(table)), key=lambda i: (table["status"][i] == Status.CORRECT, -frequency[i],
                                                     table["status"][i], natural_key(table["problem"][i])))
    return table.iloc[order].reset_index(drop=True)


def failure_reason(row) -> str:
    """One line: the flags raised (if any), then the row's message, first mismatch or sweep failure."""
    flags = disqualifying_flags(row)
    columns = ("sweep_failure", "message") if flags else ("message", "first_mismatch")
    detail = next((_text(row, column) for column in columns if _text(row, column)), "")
    detail = detail.splitlines()[0] if detail else ""
    if flags:
        return f"flags: {', '.join(flags)}" + (f"; {detail}" if detail else "")
    return detail


@dataclass(frozen=True)
class Summary:
    results: int                     # rows summarised (latest per problem and solution)
    problems: int
    status_counts: dict
    fast_p: dict                     # trusted (the headline): correct, official sizes, no disqualifying flag
    fast_p_kernelbench: dict         # KernelBench's: correct at the official sizes
    reduced_sizes: int               # correct results run at reduced sizes: in neither fast_p
    geometric_mean_speedup: float | None
    best: pd.DataFrame
    failures: pd.DataFrame           # not correct, or correct with a disqualifying flag
    run_ids: tuple = ()              # runs the rows came from
    devices: tuple = ()              # device names the rows ran on

    def to_dict(self) -> dict:
        as_keys = lambda values: {f"fast_{p:g}": value for p, value in values.items()}
        return {
            "results": self.results, "problems": self.problems, "status_counts": self.status_counts,
            "fast_p": {"trusted": as_keys(self.fast_p), "kernelbench": as_keys(self.fast_p_kernelbench)},
            "reduced_size_results": self.reduced_sizes,
            "geometric_mean_speedup": self.geometric_mean_speedup,
            "best_per_problem": _records(self.best), "failures": _records(self.failures),
            "run_ids": list(self.run_ids), "devices": list(self.devices),
        }


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{key: (None if isinstance(value, float) and math.isnan(value) else value) for key, value in row.items()}
            for row in frame.to_dict("records")]


def _distinct(frame: pd.DataFrame, column: str) -> tuple:
    return tuple(value for value in dict.fromkeys(_column(frame, column)) if value)


def summarise(frame: pd.DataFrame) -> Summary:
    """The whole summary of a non-empty results frame."""
    correct = frame["status"] == Status.CORRECT
    return Summary(results=len(frame), problems=int(frame["problem"].nunique()), status_counts=status_counts(frame),
                   fast_p=fast_p_trusted(frame), fast_p_kernelbench=fast_p_kernelbench(frame),
                   reduced_sizes=int((correct & ~official_mask(frame)).sum()),
                   geometric_mean_speedup=geometric_mean_speedup(frame), best=best_per_problem(frame),
                   failures=failures(frame), run_ids=_distinct(frame, "run_id"),
                   devices=_distinct(frame, "device_name") or _distinct(frame, "device"))


def compare(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Problem by problem: best speedup and correct count in each run, and the ratio after/before."""
    left = best_per_problem(before)[["problem", "correct", "best_speedup"]]
    right = best_per_problem(after)[["problem", "correct", "best_speedup"]]
    merged = left.merge(right, on="problem", how="outer", suffixes=("_a", "_b"))
    merged = merged.iloc[sorted(range(len(merged)), key=lambda i: natural_key(merged["problem"][i]))]
    merged["ratio_b_over_a"] = (pd.to_numeric(merged["best_speedup_b"], errors="coerce")
                                / pd.to_numeric(merged["best_speedup_a"], errors="coerce"))
    return merged.reset_index(drop=True)
