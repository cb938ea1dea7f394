"""The candidate's runner reads only what it needs and leaves nothing behind (kbench/runner/limits.py,
kbench/judge/remote_process.py): candidates that reach for the machine's /dev/shm, other solutions, the results or
the judge's environment are refused, and the JIT caches' renames (Triton's, Inductor's) work inside the runner's
own folders. Each fixture is described in tests/fixtures/confinement/README.md."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kbench.config import RunConfig
from kbench.judge.remote_process import RunnerProcess
from kbench.results import Status
from kbench.runner import landlock, limits
from kbench.schedule.child import evaluate

from conftest import FIXTURES, PROBLEMS

CONFINEMENT = FIXTURES / "confinement"
AXPY = PROBLEMS / "axpy.py"

needs_landlock = pytest.mark.skipif(not landlock.landlock_available(), reason="needs Landlock")


@pytest.fixture()
def config(tmp_path) -> RunConfig:
    """A cache of its own (no C++ fixture is needed) and short timing: these tests check boundaries."""
    return RunConfig(device="cpu", cache_dir=tmp_path / "cache", timeout_s=300, time_budget_s=0.3, min_samples=3,
                     sweep=0)


def _own_copy(tmp_path: Path, fixture: str, replacements: dict[str, str] | None = None) -> Path:
    """The fixture in a folder of the test's, with a line of its own (the content names its files and builds)."""
    text = (CONFINEMENT / fixture).read_text()
    for old, new in (replacements or {}).items():
        assert old in text
        text = text.replace(old, new)
    copy = tmp_path / "solutions" / fixture
    copy.parent.mkdir(exist_ok=True)
    copy.write_text(text + f"# {tmp_path.name}\n")
    return copy


def _leftover(solution: Path) -> Path:
    return Path("/dev/shm") / ("kbench-leftover-" + hashlib.sha256(solution.read_bytes()).hexdigest()[:16])


@needs_landlock
def test_a_file_a_candidate_writes_to_dev_shm_does_not_outlive_its_evaluation(config, tmp_path):
    solution = _own_copy(tmp_path, "shm_leftover.py")
    try:
        result = evaluate(AXPY, solution, config)
        assert result.status == Status.LOAD_ERROR, (result.status, result.message)
        if limits.private_shm_possible():  # the judge's own /dev/shm: written there, gone with the judge
            assert "shm-write:allowed" in result.message, result.message
        else:  # the machine's: refused
            assert "shm-write:denied" in result.message, result.message
        assert not _leftover(solution).exists()
    finally:
        _leftover(solution).unlink(missing_ok=True)


@needs_landlock
def test_without_a_private_dev_shm_the_runner_may_not_make_files_in_the_machine_s(tmp_path):
    """A runner started outside a judge's Runners.start has the machine's /dev/shm (as a judge that is not root
    has): a CPU runner may open what is there but make nothing."""
    solution = _own_copy(tmp_path, "shm_leftover.py")
    runner = RunnerProcess("cpu")
    try:
        runner.request({"op": "job", "environment": {}, "triton_cache": str(runner.scratch / "triton"), "log": False})
        reply = runner.request({"op": "load", "problem": str(runner.lend(AXPY, "problem")),
                                "solution": str(runner.lend(solution, "solution")), "policy": "strict-fp32",
                                "extensions": str(runner.lend_builds(tmp_path / "no-builds")), "log_path": ""})
        assert "shm-write:denied" in reply["failure"]["message"], reply
        assert not _leftover(solution).exists()
    finally:
        runner.stop()
        _leftover(solution).unlink(missing_ok=True)


@needs_landlock
def test_the_runner_reads_neither_other_solutions_nor_results_nor_the_judge_s_environment(config, tmp_path,
                                                                                           monkeypatch):
    monkeypatch.setenv("KBENCH_JUDGE_SECRET", "not the candidate's")
    other = tmp_path / "solutions" / "other.py"
    other.parent.mkdir()
    other.write_text("# another candidate's solution\n")
    results = tmp_path / "results" / "results.csv"
    results.parent.mkdir()
    results.write_text("problem,solution,status\n")
    targets = {"solutions_folder": str(other.parent), "other_solution": str(other), "results_csv": str(results),
               "cache": str(config.cache_dir), "kbench_pid": os.getpid()}
    solution = _own_copy(tmp_path, "reads_out.py", {"TARGETS: dict = {}": f"TARGETS: dict = {targets!r}"})
    result = evaluate(AXPY, solution, config)
    assert result.status == Status.LOAD_ERROR, (result.status, result.message)
    for attempt in ("solutions-folder", "other-solution", "results-csv", "build-cache", "worker-folder",
                    "judge-environ", "judge-cmdline", "kbench-environ", "proc-listing"):
        assert f"{attempt}:denied" in result.message, (attempt, result.message)
    for variable in ("KBENCH_WORK_DIR", "KBENCH_PARENT_PID", "KBENCH_CACHE_DIR", "KBENCH_JUDGE_SECRET"):
        assert f"env-{variable}:absent" in result.message, (variable, result.message)
    assert "home:scratch" in result.message, result.message


@needs_landlock
def test_jit_caches_rename_across_the_runner_s_folders_but_not_out_of_them(config, tmp_path):
    """Triton stores a kernel by os.replace from a temporary folder of its cache into the kernel's folder; a
    Landlock layer that grants no REFER refuses every such rename (EXDEV). Moving a file out of the runner's
    folders stays refused (the fixture raises if it goes through)."""
    solution = _own_copy(tmp_path, "jit_cache_rename.py")
    result = evaluate(AXPY, solution, config)
    assert result.status == Status.CORRECT, (result.status, result.message)
    assert not (solution.parent / "moved").exists()


def _inductor_works_here() -> bool:
    try:
        return bool(torch.equal(torch.compile(lambda x: x + 1)(torch.zeros(3)), torch.ones(3)))
    except Exception:
        return False


@needs_landlock
def test_a_torch_compile_candidate_works_in_a_confined_runner(config):
    """Inductor on a CPU: its caches, its compiler (g++), its temporary files, all in the runner's own folders."""
    if not _inductor_works_here():
        pytest.skip("torch.compile (inductor) does not work on this machine's CPU build")
    result = evaluate(AXPY, FIXTURES / "honest" / "compiled.py", config)
    assert result.status == Status.CORRECT, (result.status, result.message)


def _in_a_child(confining, answer) -> str:
    """What `answer()` returned (text) in a forked child that ran `confining` first."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery past this point
        try:
            confining()
            os.write(writing, answer().encode())
        finally:
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading) as answered:
        text = answered.read()
    os.waitpid(pid, 0)
    return text


def _seccomp_state_after(confining) -> dict[str, str]:
    """The Seccomp and Speculation lines of /proc/self/status in a child that ran `confining`."""
    text = _in_a_child(confining, lambda: open("/proc/self/status").read())
    return dict(line.split(":\t", 1) for line in text.splitlines() if line.startswith(("Seccomp", "Speculation")))


def _set_own_cpus() -> str:
    try:
        os.sched_setaffinity(0, os.sched_getaffinity(0))
        return "ok"
    except OSError as error:
        return type(error).__name__


def _affinity_change_after(confining) -> str:
    """What a child that ran `confining` got when it set its own CPUs: "ok" or the error's name."""
    return _in_a_child(confining, _set_own_cpus)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux's affinities")
def test_neither_runner_may_change_the_cpus_it_runs_on():
    """The judge pins both runners to its CPU while they are timed (processes.on_one_cpu); a runner that could set
    its own affinity would leave that CPU, and the load on it, to the other side."""
    assert _affinity_change_after(lambda: None) == "ok"
    assert _affinity_change_after(lambda: limits.confine(landlock.Access(writable=()))) == "PermissionError"
    assert _affinity_change_after(limits.protect) == "PermissionError"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux's affinities and two CPUs")
def test_judges_timing_at_once_claim_cpus_of_their_own(tmp_path):
    """Judges on one machine (one per GPU) each pin themselves and their runners to one CPU while they time
    (processes.on_one_cpu): a CPU another judge holds is passed over, and free again once that judge is done."""
    from kbench.processes import claimed_cpu

    other = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                              "from kbench.processes import claimed_cpu\n"
                              "with claimed_cpu(Path(sys.argv[1])) as cpu:\n print(cpu, flush=True); time.sleep(60)",
                              str(tmp_path)], stdout=subprocess.PIPE, text=True)
    allowed = os.sched_getaffinity(0)
    try:
        held = int(other.stdout.readline())
        for claimed in (lambda cpu: cpu is not None and cpu != held, lambda cpu: cpu == held):
            os.sched_setaffinity(0, {held})  # this judge on the CPU the other holds, free to run on any
            time.sleep(0.01)
            os.sched_setaffinity(0, allowed)
            with claimed_cpu(tmp_path) as cpu:
                assert claimed(cpu), (cpu, held)
            other.kill()
            other.wait()
    finally:
        os.sched_setaffinity(0, allowed)
        other.kill()
        other.wait()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux's affinities")
def test_the_judge_makes_no_cpu_claim_through_a_link_planted_at_the_claims_folder(tmp_path):
    """The claims live in the system's temporary folder, where an unconfined process could plant a link: the judge
    then claims nothing (it times on its own CPU) and creates nothing where the link points."""
    from kbench.processes import claimed_cpu

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "claims").symlink_to(elsewhere)
    with claimed_cpu(tmp_path / "claims") as cpu:
        assert cpu is not None
    assert not list(elsewhere.iterdir())


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_both_runners_run_under_the_same_seccomp_filter_without_forced_speculation_mitigations():
    """The candidate's runner refuses clone3 with a seccomp filter; the reference's runner runs under the same
    filter, so that what a filter costs a system call, both sides pay. Neither gets the speculation mitigations a
    kernel may force on filtered processes (they slowed a runner's own code: SECCOMP_FILTER_FLAG_SPEC_ALLOW)."""
    candidate = _seccomp_state_after(lambda: limits.confine(landlock.Access(writable=())))
    reference = _seccomp_state_after(limits.protect)
    for state in (candidate, reference):
        assert state.get("Seccomp", "").strip() == "2", state  # filter mode
        assert "force mitigated" not in state.get("Speculation_Store_Bypass", ""), state
    assert candidate.get("Seccomp_filters") == reference.get("Seccomp_filters"), (candidate, reference)
