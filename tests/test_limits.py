"""Time limits that fit a loop: a build limit and a run limit apart, a default run limit derived from the
reference's time, and a hang that costs only its own slot for only its own limit."""

from __future__ import annotations

import re
import time

import pytest

from kbench.config import RunConfig
from kbench.judge.progress import (RUN_LIMIT_FLOOR_S, SLOWER_ALLOWED, answer_limit, candidate_calls,
                                   derived_run_limit)
from kbench.results import Status
from kbench.schedule.child import EvaluationOptions, Limits, evaluate
from kbench.schedule.job import ProgressRecord
from kbench.schedule.executor import LocalExecutor
from kbench.schedule.scheduler import run_pairs
from kbench.schedule.sweep import select_pairs

from conftest import PROBLEMS, REPO, SOLUTIONS

AXPY = PROBLEMS / "axpy.py"
HANG = '''import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()

    def forward(self, x, y):
        while True:
            pass
'''


def quick(tmp_path, **fields) -> RunConfig:
    return RunConfig(**{**dict(device="cpu", cache_dir=tmp_path / "cache", time_budget_s=0.3, min_samples=3, sweep=0),
                        **fields})


def test_a_hang_costs_only_its_own_slot_and_only_its_run_limit(tmp_path):
    """One device, the hang queued first: its worker is killed once the run limit is out and the correct one
    starts at once, its result in well before the hang's limit would have passed twice."""
    limit_s = 30.0
    (tmp_path / "a_hangs.py").write_text(HANG)
    pairs = [(AXPY, tmp_path / "a_hangs.py"), (AXPY, SOLUTIONS / "axpy" / "correct_plain.py")]
    arrived = {}
    started = time.monotonic()
    config = quick(tmp_path, timeout_s=limit_s, time=False)  # untimed: a busy machine's timing is not the point
    results = run_pairs(pairs, config, devices=["cpu"], executor=LocalExecutor(),
                        on_result=lambda result: arrived.setdefault(result.solution, time.monotonic() - started))
    by_name = {result.solution.split("/")[-1]: result for result in results}
    hang, correct = by_name["a_hangs.py"], by_name["correct_plain.py"]
    assert hang.status == Status.TIMEOUT, hang.message
    assert f"no result within the run limit ({limit_s:g} s, --timeout) while checking" in hang.message
    assert correct.status == Status.CORRECT, correct.message
    hang_at, correct_at = arrived[str(pairs[0][1])], arrived[str(pairs[1][1])]
    assert limit_s <= hang_at < correct_at < 2 * limit_s, arrived


def test_a_compile_error_slower_than_the_run_limit_is_compile_error(tmp_path, cache_dir):
    started = time.monotonic()
    config = quick(tmp_path, timeout_s=1.0, cache_dir=cache_dir)  # the session's: torch's headers precompiled
    result = evaluate(AXPY, SOLUTIONS / "axpy" / "build_error.py", config)
    assert time.monotonic() - started > 1.0  # the build alone outlasted the run limit
    assert result.status == Status.COMPILE_ERROR, result.message
    assert "undeclared_thing" in result.message


def test_building_counts_against_the_build_limit_and_the_rest_against_the_run_limit(tmp_path):
    building = ProgressRecord(phase="loading solution", building="ext (c++)", build_since=time.time())
    running = ProgressRecord(phase="checking")
    limits = Limits(quick(tmp_path, timeout_s=0.3, build_timeout_s=60), build_only=False)
    time.sleep(0.5)
    assert not limits.out_of_time(building)  # half a second of building: not the run limit's
    time.sleep(0.2)
    assert not limits.out_of_time(running)
    time.sleep(0.2)
    assert limits.out_of_time(running) and limits.exceeded == "the run limit (0.3 s, --timeout)"

    limits = Limits(quick(tmp_path, timeout_s=60, build_timeout_s=0.3), build_only=False)
    time.sleep(0.5)
    assert limits.out_of_time(building) and limits.exceeded == "the build limit (0.3 s, --build-timeout)"

    # No --timeout: the judge's derived limit counts from when it appears in the record; the reference's phases before
    # it have a limit of their own.
    limits = Limits(quick(tmp_path), build_only=False)
    time.sleep(0.5)
    assert not limits.out_of_time(ProgressRecord(phase="running the reference"))
    derived = ProgressRecord(phase="checking", run_limit_s=0.3, run_limit_basis="the floor")
    assert not limits.out_of_time(derived)
    time.sleep(0.2)
    assert not limits.out_of_time(derived)
    time.sleep(0.2)
    assert limits.out_of_time(derived) and limits.exceeded == "the run limit (0.3 s: the floor; --timeout sets one)"


def test_the_derived_run_limit_has_a_floor_and_room_for_a_candidate_1000x_slower(tmp_path):
    config = quick(tmp_path)
    assert derived_run_limit(1e-5, config)[0] == RUN_LIMIT_FLOOR_S
    slow_reference_s = 0.05
    limit_s, basis = derived_run_limit(slow_reference_s, config)
    assert limit_s > SLOWER_ALLOWED * slow_reference_s * candidate_calls(config) > RUN_LIMIT_FLOOR_S
    assert f"{SLOWER_ALLOWED} x the reference's 50 ms x {candidate_calls(config)} calls" in basis
    # Every call the candidate makes is counted: trials, sweep configurations, warm-up and the timing rounds.
    assert candidate_calls(RunConfig(trials=10, sweep=8)) - candidate_calls(RunConfig(trials=5, sweep=0)) == 13


def test_a_request_may_take_the_call_timeout_or_1000x_the_reference_s_time_for_its_calls(tmp_path):
    limit = answer_limit(0.002, quick(tmp_path, call_timeout_s=60))
    assert limit({"op": "import"}) == (60, "--call-timeout 60 s")
    assert limit({"op": "call", "instance": "x"}) == (60, "--call-timeout 60 s")  # 2 s: under the floor
    batch_s, basis = limit({"op": "batch", "instance": "x", "count": 40})
    assert batch_s == pytest.approx(SLOWER_ALLOWED * 0.002 * 40) and basis == \
        f"{SLOWER_ALLOWED} x the reference's 2 ms x 40 call(s)"
    assert answer_limit(5.0, quick(tmp_path))({"op": "call"})[0] == pytest.approx(SLOWER_ALLOWED * 5.0)
    assert answer_limit(0.002, quick(tmp_path, call_timeout_s=0)) is None


def test_a_hang_ends_after_the_call_timeout_whatever_the_run_limit(tmp_path, cache_dir):
    """No --timeout: the derived run limit is a minute, yet the judge stops waiting for the hanging call after
    --call-timeout and kills the runner; the verdict is the candidate's timeout."""
    (tmp_path / "hangs.py").write_text(HANG)
    started = time.monotonic()
    result = evaluate(AXPY, tmp_path / "hangs.py", quick(tmp_path, call_timeout_s=2, cache_dir=cache_dir))
    assert result.status == Status.TIMEOUT, result.message
    assert "no answer within 2 s (--call-timeout 2 s): the judge killed it while checking" in result.message
    assert time.monotonic() - started < RUN_LIMIT_FLOOR_S / 2


def test_the_judge_writes_the_derived_run_limit_for_the_parent(tmp_path):
    records = []
    config = quick(tmp_path, time=False)  # untimed: a busy machine's timing is not the point
    result = evaluate(AXPY, SOLUTIONS / "axpy" / "correct_plain.py", config,
                      EvaluationOptions(on_progress=records.append))
    assert result.status == Status.CORRECT, result.message
    limits = {(record.run_limit_s, record.run_limit_basis) for record in records if record.run_limit_s is not None}
    (limit_s, basis), = limits  # written once, from the reference's call time, which its basis names
    reference_ms = float(re.search(r"the reference's (?:call takes )?([\d.e+-]+) ms", basis).group(1))
    expected_s, expected_basis = derived_run_limit(reference_ms / 1e3, config)
    assert limit_s == pytest.approx(expected_s, rel=0.01) and basis == expected_basis, (limit_s, basis)


def test_resume_with_only_failed_reruns_the_pairs_that_failed(tmp_path):
    import csv
    import shutil

    from kbench.schedule.child import file_hash

    (tmp_path / "problems").mkdir()
    (tmp_path / "solutions" / "axpy").mkdir(parents=True)
    shutil.copy(AXPY, tmp_path / "problems" / "axpy.py")
    for name in ("wrong_shape.py", "correct_plain.py", "runtime_error.py"):
        shutil.copy(SOLUTIONS / "axpy" / name, tmp_path / "solutions" / "axpy" / name)
    config = quick(tmp_path)
    problem = tmp_path / "problems" / "axpy.py"
    rows = [{"problem": "axpy", "solution": str(tmp_path / "solutions" / "axpy" / name), "status": status,
             "solution_hash": file_hash(tmp_path / "solutions" / "axpy" / name), "problem_hash": file_hash(problem),
             "settings": config.fingerprint("cpu")}
            for name, status in (("wrong_shape.py", "incorrect"), ("correct_plain.py", "correct"),
                                 ("runtime_error.py", "runtime_error"))]
    out = tmp_path / "results.csv"
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    pairs, _, skipped = select_pairs(tmp_path / "problems", tmp_path / "solutions", (), out, out, config, "cpu")
    assert sorted(solution.name for _, solution in pairs) == ["runtime_error.py", "wrong_shape.py"] and skipped == 0
    pairs, _, skipped = select_pairs(tmp_path / "problems", tmp_path / "solutions", (), None, out, config, "cpu")
    assert pairs == [] and skipped == 3  # --resume alone: every final row stands


REFERENCE_ITSELF = "class ModelNew(Model):\n    pass\n"
HANGS_ON_THE_GPU = '''import torch


class ModelNew(Model):
    def forward(self, *args):
        while True:
            torch.cuda._sleep(1 << 20)  # keeps the GPU busy, never returns
'''


@pytest.mark.gpu
@pytest.mark.parametrize("problem", ["gelu.py", "matmul_skinny.py"])
def test_on_a_gpu_the_run_limit_is_derived_from_the_reference_s_time_alone(tmp_path, problem):
    """The judge derives the run limit from the reference's time alone, taken before the candidate exists."""
    candidate = tmp_path / "reference_itself.py"
    candidate.write_text(REFERENCE_ITSELF)
    records = []
    config = RunConfig(device="cuda", cache_dir=tmp_path / "cache", sweep=0, time_budget_s=1.0)
    result = evaluate(REPO / "problems" / problem, candidate, config,
                      EvaluationOptions(device="cuda:0", on_progress=records.append))
    assert result.status == Status.CORRECT, result.message
    limits = {record.run_limit_s for record in records if record.run_limit_s is not None}
    derived, _ = derived_run_limit(result.reference_alone.median_ms / 1e3, config)
    assert limits == {derived}, (limits, derived)


@pytest.mark.gpu
def test_on_a_gpu_a_hang_ends_at_the_derived_run_limit(tmp_path):
    """With --call-timeout off (its 60 s would end this hang first), the run limit ends it."""
    candidate = tmp_path / "hangs.py"
    candidate.write_text(HANGS_ON_THE_GPU)
    config = RunConfig(device="cuda", cache_dir=tmp_path / "cache", sweep=0, time_budget_s=1.0, call_timeout_s=0)
    started = time.monotonic()
    result = evaluate(REPO / "problems" / "gelu.py", candidate, config, EvaluationOptions(device="cuda:0"))
    assert result.status == Status.TIMEOUT, result.message
    assert "no result within the run limit (" in result.message and "while checking" in result.message
    limit_s = float(result.message.split("the run limit (")[1].split(" s")[0])
    assert RUN_LIMIT_FLOOR_S <= limit_s <= time.monotonic() - started < 2 * limit_s, result.message
