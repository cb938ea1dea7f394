"""End to end on the CPU: real C++ builds, real child processes, one verdict per kind of bad input."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kbench import flags
from kbench.extensions.cache import _sole_builder as sole_builder
from kbench.results import Status
from kbench.schedule.child import EvaluationOptions, evaluate
from kbench.failures import WAITING_FOR_THE_LAST

from conftest import PROBLEMS, SOLUTIONS
from conftest import judged as judged_once

AXPY = PROBLEMS / "axpy.py"

def judged(config, solution: str, problem: Path = AXPY):
    return judged_once(config, SOLUTIONS / solution, problem)


@pytest.mark.parametrize("solution, status, message", [
    ("axpy/correct_plain.py", Status.CORRECT, ""),
    ("axpy/correct.py", Status.CORRECT, ""),
    ("axpy/slightly_wrong.py", Status.INCORRECT, "outside atol=0.0001 rtol=0.0001"),
    ("axpy/nan_output.py", Status.INCORRECT, "non-finite"),
    ("axpy/wrong_shape.py", Status.INCORRECT, "shape (4095,), expected (4096,)"),
    ("axpy/syntax_error.py", Status.LOAD_ERROR, "SyntaxError"),
    ("axpy/no_modelnew.py", Status.LOAD_ERROR, "defines no ModelNew"),
    ("axpy/import_error.py", Status.LOAD_ERROR, "kbench_no_such_module"),
    ("axpy/bad_init.py", Status.LOAD_ERROR, "ModelNew(*get_init_inputs()) failed: TypeError"),
    ("axpy/build_error.py", Status.COMPILE_ERROR, "undeclared_thing"),
    ("axpy/runtime_error.py", Status.RUNTIME_ERROR, "failed while checking: RuntimeError: kbench fixture: deliberate"),
    ("axpy/segfault.py", Status.CRASHED, "killed by SIGSEGV while checking"),
    ("axpy/mutates_input.py", Status.REJECTED, "changed its input tensors"),
    ("axpy/cuda_only.py", Status.SKIPPED, "needs a CUDA device"),
])
def test_verdict(cpu_config, solution, status, message):
    result = judged(cpu_config, solution)
    assert result.status == status, result.message
    assert message in result.message
    assert result.solution_hash and result.time and result.device == "cpu"


def test_correct_result_carries_check_numbers_and_timings(cpu_config):
    result = judged(cpu_config, "axpy/correct.py")
    assert (result.check.trials_passed, result.check.trials_total) == (5, 5)
    assert result.check.max_abs_err == 0.0
    assert result.reference_timing.count >= 3 and result.candidate_timing.count >= 3
    assert result.reference_timing.timer == "judge-clock"
    assert result.speedup == pytest.approx(result.reference_timing.median_ms / result.candidate_timing.median_ms)
    assert result.policy == "strict-fp32" and result.torch_version
    assert result.build_s is not None


def test_the_judge_s_clock_line_names_the_parts_of_its_resolution(cpu_config):
    """The evaluation's log gives the plan of the batches (timed_sides.plan_batches): the fixed cost per batch, the
    judge's copy per call, its own copy of one slot, a batch of no calls, and the resolution the unverified_time flag
    uses, which is the runner's share of the fixed cost (less the launch of the judge's copy): measured, not left at
    the whole fixed cost."""
    log = Path(judged(cpu_config, "axpy/correct.py").log_path).read_text()
    line = next(line for line in log.splitlines() if "kbench: judge's clock: batches of" in line)
    number = r"([0-9.e+-]+)"
    count = int(re.search(r"batches of (\d+) call", line).group(1))
    fixed, copy, slot, empty, resolution = (float(re.search(pattern, line).group(1)) for pattern in (
        rf"fixed cost {number} ms per batch", rf"copy of the outputs {number} ms per call",
        rf"own copy of one slot {number} ms", rf"a batch of no calls {number} ms", rf"resolution {number} ms per call"))
    assert 0 < copy <= slot and 0 < slot and empty > 0, line
    launch = max(slot - copy, 0.0)
    assert resolution * count == pytest.approx(max(fixed - launch, min(empty, fixed)), rel=0.01, abs=1e-6), line


def test_the_log_splits_each_side_s_batches_at_the_runner_s_reply(cpu_config):
    """Where the sides' batches differ (timing.md): each side's median time from its request to the runner's reply,
    a part of its median batch wall (the rest is the judge's copies after the reply)."""
    log = Path(judged(cpu_config, "axpy/correct.py").log_path).read_text()
    walls = dict(re.findall(r"(\w+) ([0-9.e+-]+) ms, [0-9.e+-]+ ms, \d+",
                            next(line for line in log.splitlines() if "median batch wall time" in line)))
    reply_line = next(line for line in log.splitlines() if "to the runner's reply" in line)
    replies = dict(re.findall(r"(\w+) ([0-9.e+-]+)", reply_line.split(": ")[-1]))
    assert {"candidate", "reference"} <= set(replies) <= set(walls), (replies, walls)
    for side, reply in replies.items():
        assert 0 < float(reply) < float(walls[side]), (side, replies, walls)


def phase_seconds(result) -> dict[str, float]:
    seconds = {}
    for entry in result.phase_s.split("; "):
        name, _, value = entry.rpartition(" ")
        seconds[name] = float(value)
    return seconds


def test_phase_seconds_name_the_judge_s_phases_and_the_worker_s_end(cpu_config):
    """Where an evaluation's time goes, to the end: the judge's phases and (kbench's own view) the time from
    the verdict's writing until kbench read it (bench/split_cost.py sums these)."""
    result = judged(cpu_config, "axpy/correct.py")
    seconds = phase_seconds(result)
    assert {"checking", "timing", "ending the worker"} <= set(seconds), result.phase_s
    assert sum(seconds.values()) < result.wall_s + 1


def test_a_result_is_taken_when_written_and_the_next_judge_s_marker_comes_once_runner_and_judge_are_gone(
        cpu_config, tmp_path):
    """kbench goes on once the judge has written its verdict; the marker the next judge on the device waits for
    appears only once the candidate's runner (here, one whose load error names its process) and the judge are gone."""
    from kbench.processes import alive
    from kbench.schedule.pool import worker_pool

    solution = tmp_path / "tells_its_process.py"
    solution.write_text("import os\nraise RuntimeError(f'runner process {os.getpid()} of {os.getppid()}')\n")
    result = evaluate(AXPY, solution, cpu_config)
    assert result.status == Status.LOAD_ERROR, result.message
    runner, judge = map(int, re.search(r"runner process (\d+) of (\d+)", result.message).groups())
    marker = Path(worker_pool().ending_marker("cpu"))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert marker.exists()
    assert not alive(runner) and not alive(judge), "the marker appeared while the last evaluation's processes ran"


def test_a_judge_times_nothing_and_runs_no_candidate_code_until_the_last_evaluation_on_the_device_has_ended(
        cpu_config, tmp_path):
    """The next evaluation starts while the last one's worker ends: its judge runs its reference meanwhile (nothing
    timed), then waits for that ending's marker before timing anything or loading the candidate."""
    import threading

    from kbench.schedule.pool import _waiting_key, worker_pool

    pool = worker_pool()
    marker = tmp_path / "ended"
    ending = threading.Thread(target=lambda: None)
    ending.start()
    pool.endings.last[_waiting_key("cpu")] = (marker, ending)  # an evaluation still ending, as far as the pool knows
    phases, results = [], []
    evaluation = threading.Thread(target=lambda: results.append(evaluate(
        AXPY, SOLUTIONS / "axpy/correct_plain.py", cpu_config,
        EvaluationOptions(on_progress=lambda record: phases.append(record.phase)))))
    evaluation.start()
    deadline = time.monotonic() + 90  # the worker's start waits for the test session's builds, on a busy machine
    while WAITING_FOR_THE_LAST not in phases and time.monotonic() < deadline:
        time.sleep(0.05)
    evaluation.join(timeout=2)
    assert evaluation.is_alive() and not results
    assert phases[-1] == WAITING_FOR_THE_LAST, phases
    assert set(phases) <= {"starting", "loading problem", "running the reference", WAITING_FOR_THE_LAST}, phases
    marker.touch()
    evaluation.join(timeout=120)
    assert results[0].status == Status.CORRECT, results[0].message
    seconds = phase_seconds(results[0])  # in the order the phases came
    assert seconds[WAITING_FOR_THE_LAST] >= 1.5
    assert list(seconds).index(WAITING_FOR_THE_LAST) < list(seconds).index("checking"), seconds


def test_incorrect_result_records_errors_and_first_mismatch(cpu_config):
    result = judged(cpu_config, "axpy/slightly_wrong.py")
    check = result.check
    assert check.trials_passed == 0 and check.trials_total == 5
    assert 0.9e-3 < check.max_rel_err < 1.1e-3
    assert 0.9e-3 < check.norm_err < 1.1e-3
    assert check.first_mismatch.startswith("trial 0: output[")


def test_mutated_inputs_are_flagged(cpu_config):
    assert "mutated_inputs" in judged(cpu_config, "axpy/mutates_input.py").flags


def test_compile_error_keeps_full_log_and_first_error_line(cpu_config):
    result = judged(cpu_config, "axpy/build_error.py")
    assert "error" in result.message and "undeclared_thing" in result.message
    log = Path(result.log_path).read_text()
    assert "undeclared_thing" in log and "ninja" in log.lower()


def test_compile_errors_are_cached_like_builds(cpu_config):
    first = judged(cpu_config, "axpy/build_error.py")
    started = time.monotonic()
    again = evaluate(AXPY, SOLUTIONS / "axpy/build_error.py", cpu_config)
    assert again.status == Status.COMPILE_ERROR and again.message == first.message
    assert again.build_reused is True and time.monotonic() - started < 20


def test_unchanged_solution_is_not_rebuilt(cpu_config):
    first = judged(cpu_config, "axpy/correct.py")
    artefacts = {path: path.stat().st_mtime_ns for path in cpu_config.cache_dir.rglob("axpy_correct*.so")}
    assert artefacts, "the first evaluation left no built extension in the cache"
    second = evaluate(AXPY, SOLUTIONS / "axpy/correct.py", cpu_config)
    assert second.status == Status.CORRECT and first.status == Status.CORRECT
    assert second.build_reused is True
    assert {path: path.stat().st_mtime_ns for path in artefacts} == artefacts


def test_extensions_with_the_same_name_get_separate_folders(cpu_config, tmp_path):
    # Two different sources under one extension name must not overwrite each other's build.
    source = (SOLUTIONS / "axpy/correct.py").read_text()
    renamed = source.replace('name="axpy_correct"', 'name="axpy_slightly_wrong"')
    assert renamed != source
    clash = tmp_path / "same_name.py"
    clash.write_text(renamed)
    assert evaluate(AXPY, clash, cpu_config).status == Status.CORRECT
    assert judged(cpu_config, "axpy/slightly_wrong.py").status == Status.INCORRECT
    folders = {path.parent for path in cpu_config.cache_dir.rglob("axpy_slightly_wrong*.so")}
    assert len(folders) == 2


def test_hang_becomes_timeout_and_the_worker_is_killed(cpu_config, tmp_path):
    # The hanging forward (in the runner) first starts a process of its own, in a process group of its own but
    # in the runner's session: killing the judge's session, or the runner's group, would leave it running. It
    # says its pid in the log (the runner may write nowhere else the test can read).
    marker = f"kbench_hang_helper_{int(time.time() * 1000)}"
    solution = tmp_path / "hangs_with_a_helper.py"
    solution.write_text((SOLUTIONS / "axpy/infinite_loop.py").read_text() + f"""
import os, subprocess, sys
_hanging_forward = ModelNew.forward
def _forward(self, *args):
    print("RUNNER PID", os.getpid(), "WORK", os.path.dirname(os.environ["TMPDIR"]), flush=True)  # its scratch's
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", {marker!r}], process_group=0)
    return _hanging_forward(self, *args)
ModelNew.forward = _forward
""")
    built = evaluate(AXPY, solution, cpu_config, EvaluationOptions(build_only=True))
    assert built.status == Status.BUILT, built.message
    started = time.monotonic()
    result = evaluate(AXPY, solution, replace(cpu_config, timeout_s=8))
    assert result.status == Status.TIMEOUT
    assert "no result within the run limit (8 s, --timeout) while checking" in result.message
    assert time.monotonic() - started < 30
    pid = Path(result.log_path).read_text().split("RUNNER PID ")[1].split()[0]
    assert not Path(f"/proc/{pid}/cmdline").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in processes
    # The killed judge never removed its runners' folders (arenas, scratch): its worker's folder went with it.
    work = Path(Path(result.log_path).read_text().split(" WORK ")[1].split()[0])
    assert work.name.startswith("kbench-worker-") and not work.exists()


def test_build_past_its_timeout_is_timeout_and_compilers_are_killed(cpu_config, tmp_path):
    marker = f"kbench_slow_build_{int(time.time() * 1000)}"
    source = (SOLUTIONS / "axpy/correct.py").read_text().replace('name="axpy_correct"', f'name="{marker}"')
    # Optimised (so torch's whole header, not the light one) with flags no primer saw: parsing it outlasts the
    # timeout, where the fixture's own build (light header, precompiled) takes about 5 s.
    source = source.replace("verbose=False,", f'verbose=False, extra_cflags=["-O2", "-D{marker.upper()}"],')
    assert "extra_cflags" in source
    solution = tmp_path / "slow_build.py"
    solution.write_text(source)
    result = evaluate(AXPY, solution, replace(cpu_config, build_timeout_s=6))
    assert result.status == Status.TIMEOUT
    assert "no result within the build limit (6 s, --build-timeout) while building kbench_slow_build_" \
        in result.message and "(c++)" in result.message
    time.sleep(0.5)
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in processes


def test_a_lock_left_by_a_killed_build_does_not_block_the_next_build(cpu_config):
    judged(cpu_config, "axpy/correct.py")
    # What torch leaves in a build folder when the build is killed (a timeout, a lost Ray worker), made as that
    # build made it: holding the folder's build lock (which other tests of this cache hold while they look at it).
    folder = next(cpu_config.cache_dir.rglob("axpy_correct-*"))
    stale = folder / "lock"
    with sole_builder(folder):
        stale.touch()
    built = evaluate(AXPY, SOLUTIONS / "axpy/correct.py", replace(cpu_config, timeout_s=60),
                     EvaluationOptions(build_only=True))
    assert built.status == Status.BUILT, built.message
    assert not stale.exists()


def test_an_evaluation_loads_what_the_build_left_without_writing_the_build_cache(cpu_config):
    """The build phase names each module it built (cache.BUILT_MODULE); an evaluation's runner, confined before its
    job to its own folders, loads it from there as it is: nothing in the build folder changes. The folder's build
    lock is held meanwhile, as a build holds it: other tests build this fixture in the same cache, and a build
    phase rewrites its folder (an evaluation that needed the lock would wait for the test's timeout)."""
    judged(cpu_config, "axpy/correct.py")
    folder = next(cpu_config.cache_dir.rglob("axpy_correct-*"))
    assert (folder / "kbench_built.json").is_file()
    with sole_builder(folder):
        before = {path: path.stat().st_mtime_ns for path in folder.rglob("*")}
        result = evaluate(AXPY, SOLUTIONS / "axpy/correct.py", replace(cpu_config, timeout_s=120))
        after = {path: path.stat().st_mtime_ns for path in folder.rglob("*")}
    assert result.status == Status.CORRECT and result.build_reused, result.message
    assert after == before


def test_tuple_outputs(cpu_config):
    assert judged(cpu_config, "minmax/correct.py", PROBLEMS / "minmax.py").status == Status.CORRECT
    swapped = judged(cpu_config, "minmax/swapped.py", PROBLEMS / "minmax.py")
    assert swapped.status == Status.INCORRECT and "output 0" in swapped.message


def test_seeded_parameters_match_for_a_model_with_weights(cpu_config):
    result = judged(cpu_config, "linear/correct.py", PROBLEMS / "linear.py")
    assert result.status == Status.CORRECT, result.message


def test_broken_problem_is_a_reference_error_not_the_candidates_fault(cpu_config, tmp_path):
    problem = tmp_path / "broken.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n"
                       "    def __init__(self, alpha):\n        super().__init__()\n"
                       "    def forward(self, x, y):\n        raise ValueError('reference is broken')\n"
                       "def get_inputs():\n    return [torch.rand(3), torch.rand(3)]\n"
                       "def get_init_inputs():\n    return [0.5]\n")
    result = evaluate(problem, SOLUTIONS / "axpy/correct_plain.py", cpu_config)
    assert result.status == Status.REFERENCE_ERROR and "reference is broken" in result.message


def test_waiting_workers_are_replaced_after_use_or_death_and_stopped(cpu_config):
    import os
    import signal

    from kbench.schedule.pool import worker_pool

    pool = worker_pool()
    assert evaluate(AXPY, SOLUTIONS / "axpy/correct_plain.py", cpu_config).status == Status.CORRECT
    waiting = pool.waiting("cpu")
    assert len(waiting) == pool.WAITING_PER_DEVICE and all(p.poll() is None for p in waiting)
    for process in waiting:  # a waiting worker that dies must not cost the next evaluation its verdict
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert evaluate(AXPY, SOLUTIONS / "axpy/correct_plain.py", cpu_config).status == Status.CORRECT
    fresh = pool.waiting("cpu")
    assert fresh and not set(p.pid for p in fresh) & set(p.pid for p in waiting)
    pool.stop_waiting()
    assert pool.waiting("cpu") == [] and all(p.poll() is not None for p in fresh)


def test_a_taken_waiting_worker_is_replaced_once_the_reference_was_timed_alone(cpu_config, monkeypatch, tmp_path):
    """A replacement's warm-up (three CUDA contexts on a GPU) must not run beside the reference's time alone: the
    pool tops up once the evaluation's progress is past the phases before the candidate."""
    import tempfile

    from kbench.schedule import pool as pool_module
    from kbench.failures import PHASES_BEFORE_THE_CANDIDATE
    from kbench.schedule.job import ProgressRecord

    pool = pool_module.worker_pool()
    pool.prestart("cpu")  # a waiting worker to take
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the evaluation's progress file lies
    phases_at_top_up = []
    prestart = pool_module.WorkerPool.prestart

    def recorded(self, device):
        phases_at_top_up.append([ProgressRecord.load(path).phase for path in tmp_path.glob("kbench-job-*/progress.json")])
        prestart(self, device)
    monkeypatch.setattr(pool_module.WorkerPool, "prestart", recorded)
    assert evaluate(AXPY, SOLUTIONS / "axpy/correct_plain.py", cpu_config).status == Status.CORRECT
    assert len(phases_at_top_up) == 1 and len(phases_at_top_up[0]) == 1, phases_at_top_up
    assert phases_at_top_up[0][0] not in PHASES_BEFORE_THE_CANDIDATE, phases_at_top_up


def test_a_build_never_takes_a_waiting_worker(cpu_config):
    """A waiting worker has made its CUDA contexts (on a GPU); a build needs none, so it gets a fresh worker
    and the waiting ones stay waiting."""
    from kbench.schedule.pool import worker_pool

    pool = worker_pool()
    pool.prestart("cpu")
    waiting = {process.pid for process in pool.waiting("cpu")}
    built = evaluate(AXPY, SOLUTIONS / "axpy/correct.py", cpu_config, EvaluationOptions(build_only=True))
    assert built.status == Status.BUILT, built.message
    assert waiting and {process.pid for process in pool.waiting("cpu")} == waiting


def test_waiting_workers_serve_only_the_gpus_visible_when_they_started(cpu_config, monkeypatch, tmp_path):
    # A Ray worker runs each task under the CUDA_VISIBLE_DEVICES Ray chose for it; a waiting worker started
    # under another value would evaluate on another task's GPU.
    from kbench.schedule.pool import worker_pool

    pool = worker_pool()
    solution = tmp_path / "records_visible_gpus.py"
    solution.write_text((SOLUTIONS / "axpy/correct_plain.py").read_text().replace(
        "        self.alpha = alpha",
        "        self.alpha = alpha\n        import os\n"  # to the log: the runner may write nowhere else
        "        print('VISIBLE=' + os.environ.get('CUDA_VISIBLE_DEVICES', '') + ';', flush=True)"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    pool.prestart("cpu")
    for_gpu_1 = pool.waiting("cpu", visible_devices="1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    result = evaluate(AXPY, solution, cpu_config)
    assert result.status == Status.CORRECT, result.message
    assert pool.waiting("cpu", visible_devices="1") == for_gpu_1 and all(p.poll() is None for p in for_gpu_1)
    log = Path(result.log_path).read_text()
    assert {part.split(";")[0] for part in log.split("VISIBLE=")[1:]} == {"0"}
    pool.stop_waiting()


AFFINITY_PRINT = """
        import os
        cpus = sorted(os.sched_getaffinity(0))
        if cpus != getattr(self, "last_cpus", None):
            self.last_cpus = cpus
            print(f"{WHO} pid={os.getpid()} cpus={cpus}", flush=True)
"""


def test_on_a_cpu_the_judge_and_both_runners_are_timed_on_one_cpu(cpu_config, tmp_path):
    """measure._taking_turns_on_one_cpu: while timing, the judge and both runners share one CPU (they take turns), so
    a busy neighbour on one CPU slows both sides alike. The reference's Model and the candidate say where they run."""
    problem = tmp_path / "axpy.py"
    problem.write_text(AXPY.read_text().replace(
        "        return self.alpha * x + y", AFFINITY_PRINT.replace("{WHO}", "MODEL") + "        return self.alpha * x + y"))
    solution = tmp_path / "solution.py"
    solution.write_text((SOLUTIONS / "axpy/correct_plain.py").read_text().replace(
        "        return torch.add(", AFFINITY_PRINT.replace("{WHO}", "CANDIDATE") + "        return torch.add("))
    result = evaluate(problem, solution, replace(cpu_config, sweep=0))
    assert result.status == Status.CORRECT, result.message
    log = Path(result.log_path).read_text()
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: nothing to pin")
    cpu = int(re.search(r"kbench: timing on CPU (\d+): the judge and both runners", log).group(1))
    timed = log[log.index("kbench: timing on CPU"):]
    candidate = set(re.findall(r"CANDIDATE pid=(\d+) cpus=\[(\d+)\]", timed))
    model = set(re.findall(r"MODEL pid=(\d+) cpus=\[(\d+)\]", timed))
    assert {int(cpus) for _, cpus in candidate} == {cpu}, candidate  # the candidate's runner
    assert {int(cpus) for _, cpus in model} == {cpu} and len(model) >= 1, model  # the reference's runner
    before = log[:log.index("kbench: timing on CPU")]
    assert re.search(r"CANDIDATE pid=\d+ cpus=\[\d+(, \d+)+\]", before), "the runner had every CPU before"


LEAVING_THE_CPU = """
import os
import threading
import time

_thread = threading.Thread(target=time.sleep, args=(3600,), daemon=True)  # started at import, before any pinning
_thread.start()
_seen = []
"""

LEAVE = """
        cpus = sorted(os.sched_getaffinity(_thread.native_id))  # the import-time thread's CPUs, as they are now
        if cpus not in _seen[-1:]:
            _seen.append(cpus)
            print(f"THREAD cpus={cpus}", flush=True)
        try:
            os.sched_setaffinity(0, range(os.cpu_count()))
            print("WIDENED", flush=True)
        except OSError:
            pass
"""


def test_a_candidate_cannot_take_its_runner_off_the_cpu_it_is_timed_on(cpu_config, tmp_path):
    """A thread the candidate started at import keeps the CPUs it had unless every thread is pinned, and a runner
    that widened its own affinity in each call would leave the shared CPU's load to the reference: every thread of
    the runner is pinned (processes.on_one_cpu), and sched_setaffinity is refused in the runner (limits.py)."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: nothing to pin")
    solution = tmp_path / "solution.py"
    solution.write_text(LEAVING_THE_CPU + (SOLUTIONS / "axpy/correct_plain.py").read_text().replace(
        "        return torch.add(", LEAVE + "        return torch.add("))
    result = evaluate(AXPY, solution, replace(cpu_config, sweep=0))
    assert result.status == Status.CORRECT, result.message
    log = Path(result.log_path).read_text()
    cpu = int(re.search(r"kbench: timing on CPU (\d+): the judge and both runners", log).group(1))
    timed = log[log.index("kbench: timing on CPU"):]
    assert f"THREAD cpus=[{cpu}]" in timed, timed[-2000:]
    assert "WIDENED" not in log


def test_baselines_pytorch_defaults_and_compile_are_timed_in_the_same_rounds(cpu_config):
    config = replace(cpu_config, baselines=("default", "compile"), sweep=0)
    result = evaluate(AXPY, SOLUTIONS / "axpy/correct.py", config)
    assert result.status == Status.CORRECT, result.message
    names = [name for name, _ in result.baselines]
    assert sorted(names) == ["compile", "default"]
    # On the CPU PyTorch's defaults are the checked settings: the default baseline is the reference.
    assert result.baseline_median_ms("default") == result.reference_timing.median_ms
    for name, timing in result.baselines:
        assert timing.count == result.candidate_timing.count  # sampled round by round with the others
        assert result.baseline_speedup(name) > 0
    row = result.to_row()
    assert row["speedup_compile"] == result.baseline_speedup("compile") and row["default_median_ms"] > 0
    # Compiling the reference must not look like tampering: no flag but the timing's own notes (a loaded CPU
    # can make the candidate look faster than the judge's clock confirms).
    assert not set(result.flags) - set(flags.MEASUREMENT), result.flags


def test_an_extension_built_after_the_import_is_built_in_the_evaluation_s_own_folder(cpu_config, tmp_path):
    """A solution that calls load_inline in ModelNew.__init__ builds nothing in the build phase: its evaluation's
    runner, which may not write the build cache, builds it in its scratch folder, and judges it as any other. The
    build runs under the build limit, not the request's (--call-timeout: far shorter than the build here)."""
    from kbench.extensions.cache import solution_folder

    source = (SOLUTIONS / "axpy/correct.py").read_text()
    source = source.replace("axpy_ext = load_inline(", "def _build():\n    return load_inline(")
    source = source.replace("        self.alpha = alpha\n",
                            "        self.alpha = alpha\n        global axpy_ext\n        axpy_ext = _build()\n")
    assert "axpy_ext = _build()" in source
    solution = tmp_path / "built_in_init.py"
    solution.write_text(source)
    result = evaluate(AXPY, solution, replace(cpu_config, sweep=2, call_timeout_s=5))
    assert result.status == Status.CORRECT, result.message
    assert not list(solution_folder(cpu_config.cache_dir, "extensions", solution).rglob("*.so"))
