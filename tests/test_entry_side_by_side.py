"""bench/kernelbench_side_by_side.py's entry-point comparison on a CPU: reference candidates written for level-1
problems, kbench's eval_kernel_against_ref on them at bfloat16 (build pass, calls, warm overhead), and the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = REPO / "bench" / "kernelbench_side_by_side.py"
# ../shared/kernelbench beside a checkout, or beside the folder of worktrees holding this one
KERNELBENCH = next((folder for folder in (REPO.parent / "shared" / "kernelbench",
                                          REPO.parents[1] / "shared" / "kernelbench") if folder.is_dir()),
                   REPO.parent / "shared" / "kernelbench")


def helper(*arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, PYTHONPATH=str(REPO)))


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")
def test_kbench_s_entry_point_on_reference_candidates_at_bfloat16(tmp_path):
    written = helper("reference-candidates", KERNELBENCH, tmp_path / "candidates", 19, 23)
    assert written.returncode == 0, written.stderr
    (tmp_path / "selected.txt").write_text(written.stdout)
    completed = helper("kbench-entry", tmp_path, "--problems", KERNELBENCH, "--work", tmp_path / "work",
                       "--device", "cpu", "--overhead", "2", "--precision", "bfloat16")
    assert completed.returncode == 0, completed.stderr
    rows = [json.loads(line) for line in (tmp_path / "kbench_entry.jsonl").read_text().splitlines()]
    assert [row["solution"] for row in rows] == ["level_1_problem_19_sample_0_kernel.py",
                                                 "level_1_problem_23_sample_0_kernel.py"]
    assert all(row["correctness"] and row["runtime_ms"] > 0 and row["ref_runtime_ms"] > 0 for row in rows), rows
    times = json.loads((tmp_path / "kbench_entry_times.json").read_text())
    assert times["precision"] == "bfloat16" and len(times["overhead_calls_s"]) == 2
    assert "  19 ReLU" in completed.stdout and "warm call" in completed.stdout
