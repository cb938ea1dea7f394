"""kbench sweep (crash and hang included, every row written, resume) and kbench report (exact fast_p)."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from kbench.report import summary
from kbench.results_csv import read_rows

from conftest import PROBLEMS, SOLUTIONS
from test_cli import kbench

SWEEP_FIXTURES = ["correct.py", "correct_plain.py", "wrong_shape.py", "segfault.py", "infinite_loop.py",
                  "syntax_error.py"]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "problems").mkdir()
    shutil.copy(PROBLEMS / "axpy.py", tmp_path / "problems" / "axpy.py")
    shutil.copy(PROBLEMS / "minmax.py", tmp_path / "problems" / "minmax.py")
    (tmp_path / "solutions" / "axpy").mkdir(parents=True)
    (tmp_path / "solutions" / "minmax").mkdir(parents=True)
    for name in SWEEP_FIXTURES:
        shutil.copy(SOLUTIONS / "axpy" / name, tmp_path / "solutions" / "axpy" / name)
    shutil.copy(SOLUTIONS / "minmax" / "correct.py", tmp_path / "solutions" / "minmax" / "correct.py")
    (tmp_path / "solutions" / "_helper.py").write_text("# not a solution\n")
    return tmp_path


def test_sweep_survives_crash_and_hang_writes_every_row_and_resumes(tree, cpu_config):
    args = ["sweep", "--device", "cpu", "--time-budget", "0.2", "--sweep", "2", "--timeout", "10"]
    first = kbench(*args, cwd=tree, cache_dir=cpu_config.cache_dir)
    assert first.returncode == 1, first.stderr
    rows = read_rows(tree / "results" / "results.csv")
    statuses = {row["solution"].split("/")[-1] + "@" + row["problem"]: row["status"] for row in rows}
    assert len(rows) == len(SWEEP_FIXTURES) + 1
    assert statuses["segfault.py@axpy"] == "crashed"
    assert statuses["infinite_loop.py@axpy"] == "timeout"
    assert statuses["correct.py@axpy"] == "correct" and statuses["correct.py@minmax"] == "correct"
    assert statuses["syntax_error.py@axpy"] == "load_error"
    assert len({row["run_id"] for row in rows}) == 1
    assert "fast_1" in first.stdout  # the report closes the sweep

    again = kbench(*args, "--resume", cwd=tree, cache_dir=cpu_config.cache_dir)
    assert again.returncode == 0 and "nothing to evaluate" in again.stderr
    assert len(read_rows(tree / "results" / "results.csv")) == len(rows)

    failed = kbench(*args[:-2], "--timeout", "6", "--only-failed", "--filter", "axp*", "--json", cwd=tree,
                    cache_dir=cpu_config.cache_dir)
    rerun = sorted(row["solution"].split("/")[-1] for row in json.loads(failed.stdout))
    assert rerun == ["infinite_loop.py", "segfault.py", "syntax_error.py", "wrong_shape.py"]


HAND_BUILT = [
    # problem, solution, status, speedup
    ("a", "a1", "correct", 2.5),
    ("a", "a2", "correct", 0.7),
    ("b", "b1", "correct", 0.9),
    ("b", "b2", "incorrect", 5.0),
    ("c", "c1", "rejected", 10.0),
    ("d", "d1", "correct", 1.2),
    ("d", "d1", "compile_error", None),  # a later run of the same pair replaces the earlier row
]


@pytest.fixture
def hand_built_csv(tmp_path):
    path = tmp_path / "hand.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["problem", "solution", "status", "speedup", "ref_median_ms",
                                                    "cand_median_ms", "run_id"])
        writer.writeheader()
        for problem, solution, status, speedup in HAND_BUILT:
            writer.writerow({"problem": problem, "solution": solution, "status": status,
                             "speedup": "" if speedup is None else speedup, "ref_median_ms": 1.0,
                             "cand_median_ms": "" if speedup is None else 1.0 / speedup, "run_id": "r"})
    return path


def test_fast_p_and_geomean_exactly(hand_built_csv):
    result = summary.summarise(summary.load(hand_built_csv))
    # 4 problems; a: best correct 2.5; b: 0.9; c: none correct; d: latest row is a compile error.
    assert result.problems == 4 and result.results == 6
    assert result.fast_p == {0.0: 0.5, 0.5: 0.5, 0.8: 0.5, 1.0: 0.25, 1.5: 0.25, 2.0: 0.25}
    assert result.geometric_mean_speedup == pytest.approx((2.5 * 0.7 * 0.9) ** (1 / 3))
    assert result.status_counts == {"compile_error": 1, "correct": 3, "incorrect": 1, "rejected": 1}
    best = {row["problem"]: row["best_solution"] for row in result.best.to_dict("records")}
    assert best["a"] == "a1" and best["b"] == "b1" and best["c"] is None


def test_report_formats_plot_and_comparison(hand_built_csv, tmp_path):
    as_json = json.loads(kbench("report", hand_built_csv, "--format", "json").stdout)
    assert as_json["fast_p"]["trusted"]["fast_1"] == 0.25 and as_json["fast_p"]["kernelbench"]["fast_1"] == 0.25
    assert {row["solution"] for row in as_json["failures"]} == {"b2", "c1", "d1"}
    markdown = kbench("report", hand_built_csv, "--format", "markdown").stdout
    assert "| fast_0.8 | 50.0% | 50.0% |" in markdown
    assert "best_speedup" in kbench("report", hand_built_csv, "--format", "csv").stdout
    plot = tmp_path / "speedups.png"
    completed = kbench("report", hand_built_csv, "--plot", plot)
    assert completed.returncode == 0 and plot.read_bytes()[:4] == b"\x89PNG"
    other = tmp_path / "other.csv"
    other.write_text(hand_built_csv.read_text().replace("a,a1,correct,2.5", "a,a1,correct,5.0"))
    comparison = json.loads(kbench("report", hand_built_csv, other, "--format", "json").stdout)
    row_a = next(row for row in comparison if row["problem"] == "a")
    assert row_a["ratio_b_over_a"] == pytest.approx(2.0)


def test_report_of_a_missing_or_empty_csv_is_a_usage_error(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("problem,solution,status\n")
    completed = kbench("report", empty)
    assert completed.returncode == 2 and "no results" in completed.stderr
    assert kbench("report", tmp_path / "missing.csv").returncode == 2
