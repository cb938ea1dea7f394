"""The command line as a user runs it: python -m kbench, exit codes, JSON, CSV, pairing, usage errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from kbench.results_csv import read_rows

from conftest import PROBLEMS, REPO, SOLUTIONS


def kbench(*args, cwd=None, cache_dir=None, **environment_overrides):
    environment = dict(os.environ, PYTHONPATH=str(REPO), KBENCH_CACHE_DIR=str(cache_dir or ""),
                       **environment_overrides)
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
    # Piped, no progress bar is drawn: one line per verdict on stderr as it comes, so a cut log says how far it got.
    judged = [line for line in completed.stderr.splitlines() if line.startswith("kbench: judged ")]
    assert [line.split(":")[1] for line in judged] == [" judged 1/3", " judged 2/3", " judged 3/3"], completed.stderr
    for name, verdict in (("wrong_shape.py", r"incorrect.*: trial 0: output has shape \(4095,\)"),
                          ("syntax_error.py", "load_error: SyntaxError"), ("correct_plain.py", r"correct, [0-9.]+x")):
        assert sum(bool(re.search(f"{name} \\(axpy\\): {verdict}", line)) for line in judged) == 1, completed.stderr


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
    assert "on the judge's own clock" in " ".join(completed.stdout.split())  # how both sides are timed, now
    completed = kbench("eval", "--help")
    for option in ("--problem", "--timeout", "--build-timeout", "--out", "--json", "--atol", "--cache-dir", "--device"):
        assert option in completed.stdout
    for command in ("eval", "sweep"):  # the run limit's default is derived, and the help says from what
        assert "derived from the reference's time" in " ".join(kbench(command, "--help").stdout.split())


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


KERNELBENCH = REPO.parent / "shared" / "kernelbench"


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")
def test_kernelbench_root_and_mixed_levels(tmp_path, cache_dir):
    """The root pairs every level's run files; a level folder judges its own level's and names the others in one
    line each, and the exit status says some were not judged; nothing paired at all is a usage error."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("level_1_problem_19_sample_0_kernel.py", "level_2_problem_12_sample_0_kernel.py"):
        (runs / name).write_text("class ModelNew(Model):  # KernelBench's namespace: the reference itself\n    pass\n")
    quick = [*FAST, "--sweep", "0", "--trials", "1", "--no-time"]
    root = kbench("sweep", "--problems", KERNELBENCH, "--solutions", runs, "--out", tmp_path / "root.csv", *quick,
                  cache_dir=cache_dir)
    assert root.returncode == 0, root.stderr
    assert sorted(row["problem"] for row in read_rows(tmp_path / "root.csv")) == ["12_Gemm_Multiply_LeakyReLU",
                                                                                 "19_ReLU"]
    level1 = kbench("sweep", "--problems", KERNELBENCH / "level1", "--solutions", runs, "--out",
                    tmp_path / "level1.csv", *quick, cache_dir=cache_dir)
    assert level1.returncode == 1
    assert [row["problem"] for row in read_rows(tmp_path / "level1.csv")] == ["19_ReLU"]
    assert "level_2_problem_12_sample_0_kernel.py is a level-2 file" in level1.stderr
    assert "1 solution(s) paired with no problem" in level1.stderr
    (runs / "level_1_problem_19_sample_0_kernel.py").unlink()
    none = kbench("sweep", "--problems", KERNELBENCH / "level1", "--solutions", runs, "--out",
                  tmp_path / "none.csv", *quick, cache_dir=cache_dir)
    assert none.returncode == 2 and "no solution under" in none.stderr
