"""bench/kernelbench_side_by_side.py: KernelBench's GPU pass spread over device calls (KB_DEADLINE, KB_KEEP). A
stand-in evaluator (real processes: a build that makes its folder, an eval that sleeps and prints KernelBench's
KBJSON line) takes the place of KernelBench's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO

BUILD = "import os, sys\nos.makedirs(sys.argv[2])\n"
EVAL = ("import json, os, sys, time\nassert os.path.isdir(sys.argv[3]), 'no build folder'\ntime.sleep(0.4)\n"
        "print('KBJSON ' + json.dumps({'compiled': True, 'correctness': True, 'metadata': {}}))\n")


def kernelbench(out, tmp_path, *options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "bench" / "kernelbench_side_by_side.py"), "kernelbench",
                           str(out), "--evaluator", str(tmp_path / "evaluator"), "--problems", str(tmp_path),
                           "--site", str(tmp_path), "--work", str(tmp_path / "work"), *options],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_kernelbench_s_gpu_pass_stops_at_its_deadline_and_the_next_call_goes_on(tmp_path):
    evaluator = tmp_path / "evaluator"
    evaluator.mkdir()
    (evaluator / "kb_build_one.py").write_text(BUILD)
    (evaluator / "kb_eval_one.py").write_text(EVAL)
    (tmp_path / "level1").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    for problem in (1, 2, 3, 4):
        (tmp_path / "level1" / f"{problem}_Problem.py").write_text("")
        (run / f"level_1_problem_{problem}_sample_0_kernel.py").write_text("")
    out = tmp_path / "out"
    out.mkdir()
    (out / "selected.txt").write_text("".join(f"{path}\n" for path in sorted(run.iterdir())))

    first = kernelbench(out, tmp_path, "--deadline", "0.5")
    assert first.returncode == 0, first.stderr
    rows = (out / "kernelbench.jsonl").read_text().splitlines()
    assert 1 <= len(rows) < 4 and "files left for a later call" in first.stdout
    times = json.loads((out / "kernelbench_times.json").read_text())
    assert "gpu_s" not in times and times["gpu_calls"] == 1  # not whole: the table gives a lower bound
    build_s = times["build_s"]

    second = kernelbench(out, tmp_path, "--deadline", "60")
    assert second.returncode == 0, second.stderr
    assert "GPU pass resumed" in second.stdout
    rows = [json.loads(line) for line in (out / "kernelbench.jsonl").read_text().splitlines()]
    assert [row["solution"] for row in rows] == sorted(path.name for path in run.iterdir())  # each once, in order
    assert all(row["correctness"] for row in rows)
    times = json.loads((out / "kernelbench_times.json").read_text())
    assert times["build_s"] == build_s and times["gpu_calls"] == 2  # no second build pass
    # Both calls' passes, every eval in them (each row's eval_s is rounded to 10 ms).
    assert times["gpu_s"] >= sum(row["eval_s"] for row in rows) - 0.005 * len(rows)

    table = subprocess.run([sys.executable, str(REPO / "bench" / "kernelbench_side_by_side.py"), "table", str(out)],
                           capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert "over 2 calls" in table.stdout and "at least" not in table.stdout, table.stdout


def test_a_later_call_whose_build_folders_are_gone_says_so(tmp_path):
    test_kernelbench_s_gpu_pass_stops_at_its_deadline_and_the_next_call_goes_on(tmp_path)
    out = tmp_path / "out"
    (out / "kernelbench.jsonl").write_text("")  # as if no eval had run, on a machine that lost the builds
    subprocess.run(["rm", "-rf", str(tmp_path / "work")], check=True)
    again = kernelbench(out, tmp_path)
    assert again.returncode != 0 and "build pass's folders are gone" in again.stderr
