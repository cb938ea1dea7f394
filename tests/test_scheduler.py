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
