"""The command line as a user runs it: python -m kbench, exit codes, JSON, CSV, pairing, usage errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from kbench.results import read_rows

from conftest import PROBLEMS, REPO, SOLUTIONS


def kbench(*args, cwd=None, cache_dir=None):
    environment = dict(os.environ, PYTHONPATH=str(REPO), KBENCH_CACHE_DIR=str(cache_dir or ""))
    return subprocess.run([sys.executable, "-m", "kbench", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=600)


FAST = ["--device", "cpu", "--time-budget", "0.2"]


def test_eval_json_csv_and_exit_code_zero(tmp_path, cache_dir):
    out = tmp_path / "results.csv"
    completed = kbench("eval", "--problem", PROBLEMS / "axpy.py", SOLUTIONS / "axpy/correct_plain.py",
                       "--json", "--out", out, *FAST, cache_dir=cache_dir)
    assert completed.returncode == 0, completed.stderr
    rows = json.loads(completed.stdout)
    assert rows[0]["status"] == "correct" and rows[0]["speedup"] > 0
    assert isinstance(rows[0]["cand_samples_ms"], list)
    saved = read_rows(out)
    assert saved[0]["status"] == "correct" and saved[0]["solution_hash"] == rows[0]["solution_hash"]


def test_any_failure_exits_one_and_every_row_is_written(tmp_path, cache_dir):
    out = tmp_path / "results.csv"
    completed = kbench("eval", "--problem", PROBLEMS / "axpy.py", SOLUTIONS / "axpy/wrong_shape.py",
                       SOLUTIONS / "axpy/syntax_error.py", SOLUTIONS / "axpy/correct_plain.py",
                       "--out", out, *FAST, cache_dir=cache_dir)
    assert completed.returncode == 1
    assert "incorrect" in completed.stdout and "load_error" in completed.stdout
    # Rows are written as results exist: build-phase failures come first.
    assert sorted(row["status"] for row in read_rows(out)) == ["correct", "incorrect", "load_error"]


def test_fixture_solutions_pair_with_fixture_problems(tmp_path, cache_dir):
    completed = kbench("eval", SOLUTIONS / "axpy/correct_plain.py", "--json", "--out", tmp_path / "r.csv",
                       *FAST, cwd=tmp_path, cache_dir=cache_dir)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)[0]["problem_path"] == str(PROBLEMS / "axpy.py")


def test_pairs_with_problems_beside_the_solutions_folder(tmp_path, cache_dir):
    (tmp_path / "problems").mkdir()
    (tmp_path / "solutions" / "axpy").mkdir(parents=True)
    shutil.copy(PROBLEMS / "axpy.py", tmp_path / "problems" / "axpy.py")
    shutil.copy(SOLUTIONS / "axpy/correct_plain.py", tmp_path / "solutions" / "axpy" / "mine.py")
    completed = kbench("eval", "solutions/axpy/mine.py", "--json", *FAST, cwd=tmp_path, cache_dir=cache_dir)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)[0]["problem"] == "axpy"
    assert read_rows(tmp_path / "results" / "results.csv")[0]["status"] == "correct"


@pytest.mark.parametrize("args, expected", [
    (["eval", "no/such/file.py"], "does not exist"),
    (["eval", "lonely.py"], "no problem found"),
    (["eval", "--trials", "0", str(SOLUTIONS / "axpy/correct_plain.py")], "--trials"),
    (["eval", "--device", "tpu", "--problem", str(PROBLEMS / "axpy.py"), str(SOLUTIONS / "axpy/correct_plain.py")],
     "expected auto, cpu, cuda or cuda:N"),
])
def test_usage_errors_exit_two_with_one_line(tmp_path, args, expected):
    (tmp_path / "lonely.py").write_text("class ModelNew: pass\n")
    completed = kbench(*args, cwd=tmp_path)
    assert completed.returncode == 2
    assert expected in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_asking_for_cuda_without_a_gpu_is_a_usage_error(tmp_path):
    completed = kbench("eval", "--device", "cuda", "--problem", PROBLEMS / "axpy.py",
                       SOLUTIONS / "axpy/correct_plain.py", cwd=tmp_path)
    assert completed.returncode == 2 and "no CUDA device here" in completed.stderr


def test_help_lists_commands_and_options():
    completed = kbench("--help")
    assert completed.returncode == 0 and "eval" in completed.stdout
    completed = kbench("eval", "--help")
    for option in ("--problem", "--timeout", "--out", "--json", "--atol", "--cache-dir", "--device"):
        assert option in completed.stdout


def test_executor_ray_without_ray_is_a_one_line_usage_error(tmp_path):
    block_ray = ("import sys; sys.modules['ray'] = None; from kbench.cli import main; "
                 "main(prog_name='kbench')")
    completed = subprocess.run(
        [sys.executable, "-c", block_ray, "sweep", "--executor", "ray", "--problems", str(PROBLEMS),
         "--solutions", str(SOLUTIONS)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines()[-1] == \
        'Error: kbench sweep --executor ray needs Ray: pip install "kbench[ray]"'
    assert "Traceback" not in completed.stderr
