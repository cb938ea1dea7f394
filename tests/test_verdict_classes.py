"""Verdicts that hold: the float64 truth decides when the float32 reference is the one that is wrong, the
problem's own faults are reference errors, and Ctrl-C never invents a verdict."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from kbench.results import Status
from kbench.results_csv import read_rows
from kbench.schedule.child import evaluate

from conftest import PROBLEMS, REPO, SOLUTIONS

CANCELLATION = PROBLEMS / "cancellation.py"


def test_a_candidate_more_accurate_than_the_float32_reference_is_correct(cpu_config):
    result = evaluate(CANCELLATION, SOLUTIONS / "cancellation/exact.py", cpu_config)
    assert result.status == Status.CORRECT, result.message
    assert result.check.truth_trials == result.check.trials_total  # every trial failed the float32 reference
    assert result.check.truth_candidate_err < 1e-3 < result.check.truth_reference_err
    assert "float64 truth decided" in result.message
    assert result.sweep.passed == result.sweep.run > 0, result.sweep  # sweep configurations ask the truth too
    row = result.to_row()
    assert row["truth_trials"] == result.check.trials_total and row["truth_reference_err"] > 1.0


def test_a_candidate_wrong_against_both_stays_incorrect(cpu_config):
    result = evaluate(CANCELLATION, SOLUTIONS / "cancellation/slightly_wrong.py", replace(cpu_config, sweep=0))
    assert result.status == Status.INCORRECT, result.message
    assert result.check.truth_trials == 0


def test_without_a_float64_truth_the_float32_reference_decides_and_the_row_says_so(cpu_config, tmp_path):
    problem, solution = tmp_path / "rounds.py", tmp_path / "rounds_off.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        return (x * 1000).round().int()\n"
                       "def get_inputs():\n    return [torch.rand(64)]\ndef get_init_inputs():\n    return []\n")
    solution.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                        "        return (x * 1000).round().int() + 1\n")
    result = evaluate(problem, solution, replace(cpu_config, sweep=0))
    assert result.status == Status.INCORRECT
    assert "no float64 truth (the reference has no floating-point output): the float32 reference decided" \
        in result.message


def test_a_problem_whose_get_inputs_raises_is_a_reference_error(cpu_config, tmp_path):
    problem = tmp_path / "broken_inputs.py"
    problem.write_text((PROBLEMS / "axpy.py").read_text() +
                       "\n\ndef get_inputs():\n    raise ValueError('the problem file is broken')\n")
    result = evaluate(problem, SOLUTIONS / "axpy/correct_plain.py", replace(cpu_config, sweep=0))
    assert result.status == Status.REFERENCE_ERROR, result.message
    assert "get_inputs() failed: ValueError: the problem file is broken" in result.message


def test_a_reference_failing_at_reduced_cpu_sizes_is_its_fault_with_a_hint(cpu_config, tmp_path):
    problem, solution = tmp_path / "needs_whole_rows.py", tmp_path / "doubles.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        assert x.numel() % 64 == 0, 'needs whole rows of 64'\n        return x * 2\n"
                       "n = 4096\nKBENCH_SMALL = {'n': 100}\n"
                       "def get_inputs():\n    return [torch.rand(n)]\ndef get_init_inputs():\n    return []\n")
    # An exact copy of the reference: it fails where the reference does, and must not be blamed for it.
    solution.write_text(problem.read_text().replace("class Model(", "class ModelNew("))
    result = evaluate(problem, solution, replace(cpu_config, sweep=0))
    assert result.status == Status.REFERENCE_ERROR, result.message  # the reference ran first, and failed
    assert "needs whole rows of 64" in result.message and "try --full-size" in result.message
    assert evaluate(problem, solution, replace(cpu_config, sweep=0, full_size=True)).status == Status.CORRECT


# --- Ctrl-C ------------------------------------------------------------------------------------------

# The candidate signals through its job's log, the one file a confined runner writes that the test can read (the
# build's runner and the evaluation's alike), and waits while a file of the test's exists (a stat, which it may do).
HELD = """
import os, pathlib, time
def _hold(name):
    folder = pathlib.Path({folder!r})
    print("kbench-test-signal", name + {suffix!r}, flush=True)
    while (folder / "hold").exists():
        time.sleep(0.05)
"""


def _signal_suffix(tmp_path: Path) -> str:
    return f"-kbench-test-{os.getpid()}-{tmp_path.name}"


def _signalled(tmp_path: Path, cache_dir: Path, name: str) -> bool:
    signal_line = f"kbench-test-signal {name}{_signal_suffix(tmp_path)}"
    return any(signal_line in log.read_text(errors="replace") for log in (cache_dir / "logs").glob("*.log"))


def _interruptible_sweep(tmp_path: Path) -> tuple[Path, Path, Path]:
    """problems/axpy.py with three solutions: one quick, one whose build (import) waits while `hold` exists,
    one whose forward waits while it exists."""
    problems, solutions = tmp_path / "problems", tmp_path / "solutions" / "axpy"
    problems.mkdir()
    solutions.mkdir(parents=True)
    (problems / "axpy.py").write_text((PROBLEMS / "axpy.py").read_text())
    plain = (SOLUTIONS / "axpy/correct_plain.py").read_text()
    (solutions / "a_quick.py").write_text(plain)
    held = HELD.format(folder=str(tmp_path), suffix=_signal_suffix(tmp_path))
    (solutions / "b_build.py").write_text(plain + held + "# builds like load_inline would\n_hold('building')\n")
    (solutions / "c_evaluation.py").write_text(plain + held + "_forward = ModelNew.forward\n"
                                               "def forward(self, *args):\n    _hold('evaluating')\n"
                                               "    return _forward(self, *args)\nModelNew.forward = forward\n")
    (tmp_path / "hold").touch()
    return problems, solutions.parent, tmp_path / "results.csv"


def _sweep(problems, solutions, out, cache_dir, *extra) -> list[str]:
    return [sys.executable, "-m", "kbench", "sweep", "--problems", str(problems), "--solutions", str(solutions),
            "--out", str(out), "--device", "cpu", "--time-budget", "0.2", "--sweep", "0", "--cache-dir",
            str(cache_dir), *extra]


def test_ctrl_c_in_builds_and_evaluations_stops_at_once_and_resume_completes(tmp_path, cache_dir):
    problems, solutions, out = _interruptible_sweep(tmp_path)
    environment = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    # SIGINT as a terminal's foreground job has it, also where the suite itself was started with it ignored
    # (a shell's background job: Python then never raises KeyboardInterrupt).
    process = subprocess.Popen(_sweep(problems, solutions, out, cache_dir), env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 180
    while not (_signalled(tmp_path, cache_dir, "building") and _signalled(tmp_path, cache_dir, "evaluating")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.1)
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)  # as the terminal does: to kbench, not to its workers' sessions
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - interrupted < 2.0, stderr
    assert process.returncode == 130, stderr
    assert f"interrupted: every finished result is in {out}" in stderr and "--resume" in stderr, stderr
    rows = read_rows(out)  # a valid CSV, with only real verdicts in it
    assert [Path(row["solution"]).name for row in rows] == ["a_quick.py"] and rows[0]["status"] == "correct"

    (tmp_path / "hold").unlink()
    resumed = subprocess.run(_sweep(problems, solutions, out, cache_dir, "--resume"), env=environment,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    rows = read_rows(out)
    assert sorted(Path(row["solution"]).name for row in rows) == ["a_quick.py", "b_build.py", "c_evaluation.py"]
    assert all(row["status"] == "correct" for row in rows), [row["message"] for row in rows]


def test_a_run_whose_every_result_is_skipped_ends_without_a_traceback(tmp_path, cache_dir):
    completed = subprocess.run([sys.executable, "-m", "kbench", "eval", str(REPO / "solutions" / "convt1d.py"),
                                "--device", "cpu", "--out", str(tmp_path / "results.csv"), "--cache-dir",
                                str(cache_dir)], env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1 and "skipped" in completed.stdout
    assert "Traceback" not in completed.stderr and "cannot schedule" not in completed.stderr, completed.stderr


def test_a_judge_lost_before_the_candidate_existed_is_infra_error_not_its_crash(tmp_path):
    from kbench.config import RunConfig
    from kbench.schedule.job import ProgressRecord
    from kbench.schedule.child import lost_worker_outcome

    config = RunConfig(device="cpu", cache_dir=tmp_path)
    for phase in ("starting", "running the reference", "timing the reference alone"):
        for returncode in (1, -9, None):
            lost = lost_worker_outcome(ProgressRecord(phase=phase), returncode, config, tmp_path / "log")
            assert lost.status == Status.INFRA_ERROR, (phase, returncode, lost)
    assert lost_worker_outcome(ProgressRecord(phase="checking"), -11, config, tmp_path / "log").status == \
        Status.CRASHED
    assert lost_worker_outcome(ProgressRecord(phase="checking"), None, config, tmp_path / "log").status == \
        Status.TIMEOUT


def test_a_judge_lost_while_sweeping_keeps_the_official_verdict_its_progress_file_holds(tmp_path):
    """The judge saves its progress at every phase and sweep configuration, serialising the official outcome
    once; what the parent reads back after the judge died in the sweep is that outcome, samples and all."""
    from kbench.config import RunConfig
    from kbench.judge.progress import Progress
    from kbench.results import Outcome, Timing
    from kbench.schedule.child import lost_worker_outcome
    from kbench.schedule.job import ProgressRecord, SweepCounts

    official = Outcome(status=Status.CORRECT, reference_timing=Timing((2.0, 2.1, 2.2), "host-clock"),
                       candidate_timing=Timing((1.0, 1.1, 0.9), "host-clock"))
    progress = Progress(tmp_path / "progress.json")
    progress.update(provisional=official)
    progress.sweep_step(SweepCounts(passed=2, run=2, total=8), "N=37")
    progress.update(flags=("weak_check",))  # saved again: the outcome is the same object
    record = ProgressRecord.load(tmp_path / "progress.json")
    assert record.provisional == official and record.sweep == SweepCounts(passed=2, run=2, total=8)
    assert record.phase == "sweeping" and record.current == "N=37" and record.flags == ("weak_check",)
    lost = lost_worker_outcome(record, -11, RunConfig(device="cpu", cache_dir=tmp_path), tmp_path / "log")
    assert lost.status == Status.CORRECT and "sweep_failed" in lost.flags, lost
    assert lost.candidate_timing == official.candidate_timing and lost.sweep.run == 3
    assert "N=37: worker killed by SIGSEGV while sweeping" in lost.sweep.first_failure


# What torch said when the judge ran out of memory on an H100 (bench/results/h100/2026-11-26/, conv2d), cut short.
_OOM = ("CUDA out of memory. Tried to allocate 7.97 GiB. GPU 0 has a total capacity of 79.18 GiB of which 1.95 GiB "
        "is free. Process 2144 has 612.00 MiB memory in use. Including non-PyTorch memory, this process has 42.47 "
        "GiB memory in use. Process 4989 has 8.58 GiB memory in use. Process 4986 has 8.58 GiB memory in use.")
_GIB = 2**30


def test_the_judge_running_out_of_memory_beside_runners_like_the_reference_s_is_kbench_s_shortage():
    from kbench.verdicts import memory_shortage
    said = memory_shortage(_OOM, 4989, 4986, int(35.9 * _GIB), int(79.18 * _GIB))
    assert "held 35.9 GiB and the reference's runner 8.6 GiB" in said and "candidate's runner 8.6 GiB" in said


def test_a_candidate_runner_holding_more_than_the_reference_s_is_to_blame_for_the_shortage():
    from kbench.verdicts import memory_shortage
    hoarding = _OOM.replace("Process 4989 has 8.58 GiB", "Process 4989 has 31.67 GiB")
    assert memory_shortage(hoarding, 4989, 4986, int(35.9 * _GIB), int(79.18 * _GIB)) == ""


def test_without_the_driver_s_figures_the_judge_must_hold_half_the_card():
    from kbench.verdicts import memory_shortage
    assert memory_shortage("CUDA out of memory.", 1, 2, int(30 * _GIB), int(79.18 * _GIB)) == ""
    assert "held 50.0 of the card's 79.2 GiB" in memory_shortage("CUDA out of memory.", 1, 2, 50 * _GIB,
                                                                  int(79.18 * _GIB))
