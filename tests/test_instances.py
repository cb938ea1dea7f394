"""A candidate cannot tell its instances apart: the official trials run on several instances of ModelNew built
alike (trials.plan_instances), one of them timed after its trials, drawn by the judge, never the last; the sweep
builds one more per configuration. Candidates right in some of their instances only end not `correct`; an honest
one that keeps state per instance stays `correct`. Each fixture is described in tests/fixtures/boundary/README.md."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from kbench import flags
from kbench.config import RunConfig
from kbench.judge.trials import OFFICIAL_INSTANCES, plan_instances
from kbench.results import Status
from kbench.schedule.child import evaluate

from conftest import FIXTURES, PROBLEMS

BOUNDARY = FIXTURES / "boundary"
AXPY_ROWS = PROBLEMS / "axpy_rows.py"


@pytest.fixture(scope="module")
def config(cache_dir) -> RunConfig:
    """Swept, not timed; plain PyTorch fixtures: no C++ builds."""
    return RunConfig(device="cpu", cache_dir=cache_dir, timeout_s=300, time=False, sweep=2)


@pytest.fixture(scope="module")
def timed_config(config) -> RunConfig:
    """Timed, with samples enough that a busy host seldom moves the judge's clock past its margins."""
    return replace(config, time=True, time_budget_s=1.0, min_samples=20)


@pytest.mark.parametrize("solution", ["first_instance_only.py", "nth_instance_only.py", "first_at_official_sizes.py"])
def test_a_candidate_right_in_some_instances_only_is_incorrect(config, solution):
    result = evaluate(AXPY_ROWS, BOUNDARY / solution, config)
    assert result.status == Status.INCORRECT, (result.status, result.message)


def test_a_candidate_right_in_the_instances_built_before_it_was_timed_only_is_incorrect(timed_config):
    result = evaluate(AXPY_ROWS, BOUNDARY / "honest_until_timed.py", timed_config)
    assert result.status == Status.INCORRECT, (result.status, result.message)
    failed = re.match(r"trial (\d+):", result.message)
    # Caught by a trial of an instance built after the timing: instances run one trial each but the timed one.
    assert failed and int(failed.group(1)) >= timed_config.trials - (OFFICIAL_INSTANCES - 1), result.message


def test_an_honest_candidate_that_keeps_state_per_instance_stays_correct(timed_config):
    result = evaluate(PROBLEMS / "linear.py", BOUNDARY / "cache_per_instance.py", timed_config)
    assert result.status == Status.CORRECT, (result.status, result.message)
    assert not set(result.flags) & {flags.SWEEP_FAILED, *flags.REJECTING}, result.message
    assert result.sweep.passed == result.sweep.run == timed_config.sweep, result.sweep
    assert result.check.trials_passed == result.check.trials_total == timed_config.trials, result.check


def test_the_timed_instance_is_drawn_by_the_judge_not_from_the_seed(timed_config):
    """The same evaluation, seed and all, again until the timed instance has been seen at two places (each is
    one of two: the chance of one place in twelve runs is 1 in 2048). The fixture fails its first timed call,
    saying which instance it is: never the last built (test_a_candidate_right_in_the_instances_built_...)."""
    seen = set()
    for _ in range(12):
        result = evaluate(AXPY_ROWS, BOUNDARY / "reports_timed_instance.py", timed_config)
        found = re.search(r"timed instance (\d+)", result.message or "")
        assert result.status == Status.RUNTIME_ERROR and found, (result.status, result.message)
        assert int(found.group(1)) < OFFICIAL_INSTANCES - 1, result.message
        seen.add(int(found.group(1)))
        if len(seen) > 1:
            return
    pytest.fail(f"the timed instance was always instance {seen}")


@pytest.mark.parametrize("trials, modes", [(5, ("kernels", "ops")), (5, ("ops",)), (5, ()), (3, ("ops",)),
                                           (3, ("kernels", "ops")), (2, ()), (1, ("kernels", "ops")), (8, ("ops",))])
def test_every_trial_runs_once_and_the_guards_calls_follow_a_plain_one_where_trials_allow(trials, modes):
    for seed in range(20):
        plan = plan_instances(trials, modes, random.Random(seed))
        calls = [call for instance in plan.calls for call in instance]
        assert [trial for trial, _ in calls] == list(range(trials)), plan
        timed = plan.calls[plan.timed]
        assert [mode for _, mode in calls if mode != "plain"] == list(modes[-len(timed):] if modes else []), plan
        assert all(mode == "plain" for index, instance in enumerate(plan.calls) if index != plan.timed
                   for _, mode in instance), plan
        if len(plan.calls) > 1:
            assert plan.timed < len(plan.calls) - 1, plan  # an instance built after the timing is checked too
            assert timed[0][1] == "plain", plan
        if trials - len(modes) >= OFFICIAL_INSTANCES:
            assert len(plan.calls) == OFFICIAL_INSTANCES, plan


def test_which_instance_is_timed_is_drawn_from_the_randomness_given():
    timed = {plan_instances(5, ("ops",), random.Random(seed)).timed for seed in range(40)}
    assert timed == set(range(OFFICIAL_INSTANCES - 1)), timed
