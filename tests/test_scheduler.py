"""The order the scheduler starts builds in (no child processes: pure bookkeeping)."""

from __future__ import annotations

from kbench.scheduler import build_order

from conftest import PROBLEMS, REPO, SOLUTIONS


def test_cuda_builds_are_started_first():
    cpp = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "correct.py")
    cuda = (REPO / "problems" / "convt1d.py", REPO / "solutions" / "convt1d.py")
    assert build_order([cpp, cuda, cpp]) == [1, 0, 2]


def test_a_solution_built_once_skips_the_build_phase_next_time(cpu_config, tmp_path):
    from dataclasses import replace

    from kbench.results import Status
    from kbench.scheduler import needs_build_phase, run_pairs

    config = replace(cpu_config, time=False, sweep=0)
    extension = SOLUTIONS / "axpy" / "correct.py"
    plain = SOLUTIONS / "axpy" / "correct_plain.py"
    assert not needs_build_phase(plain, config)  # imports build nothing: straight to evaluation
    pairs = [(PROBLEMS / "axpy.py", extension), (PROBLEMS / "axpy.py", plain)]
    assert needs_build_phase(extension, replace(config, cache_dir=tmp_path))  # a new cache: no record yet
    first = run_pairs(pairs, config, devices=["cpu"])
    assert [result.status for result in first] == [Status.CORRECT, Status.CORRECT]
    assert not needs_build_phase(extension, config)
    built = []
    second = run_pairs(pairs, config, devices=["cpu"], on_built=built.append)
    assert [result.status for result in second] == [Status.CORRECT, Status.CORRECT]
    assert all(result.build_s is None for result in built)  # no build ran: nothing was timed


def test_the_first_builds_that_fill_the_cores_come_first_and_the_rest_fill_in():
    from kbench.scheduler import BUILD_NICE, LATER_BUILD_NICE, CompilerBudget

    budget = CompilerBudget(cores=4)
    assert [budget.claim(2) for _ in range(3)] == [BUILD_NICE, BUILD_NICE, LATER_BUILD_NICE]
    # Later builds never outrank those already waiting at the lower priority, even when they would fit.
    assert budget.claim(1) == LATER_BUILD_NICE
    assert CompilerBudget(cores=1).claim(2) == BUILD_NICE  # a lone build never yields to nothing


def test_a_build_runs_at_the_niceness_it_was_given_and_an_evaluation_at_kbenchs(cpu_config):
    import os
    from dataclasses import replace

    from kbench.results import Status
    from kbench.runner import evaluate
    from kbench.scheduler import LocalExecutor

    config = replace(cpu_config, time=False, sweep=0)
    pair = (PROBLEMS / "axpy.py", SOLUTIONS / "axpy" / "reports_priority.py")
    own = os.nice(0)
    built = LocalExecutor().build(pair, config, "cpu", "", 1, build_nice=7)
    assert built.status == Status.LOAD_ERROR
    assert f"imported at niceness {min(19, own + 7)}" in built.message
    judged = evaluate(*pair, config)
    assert f"imported at niceness {own}" in judged.message
    assert built.cpu_s > 0 and judged.cpu_s > 0  # each worker's CPU time (its children's too) is recorded
