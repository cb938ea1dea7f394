"""Every side's batch starts from the same state (sides.build_sides): the runner not timed is stopped while
the other's batch runs, the candidate's while the reference and the baseline run, the reference's while the
candidate runs, and both run again once the round is over. The runners here are records of what the judge asked
of them: the question is the judge's order of requests, which no runner process can show from inside."""

from types import SimpleNamespace

import torch

from kbench.config import RunConfig
from kbench.judge.sides import BatchPlan, build_sides


class Runner:
    def __init__(self):
        self.stopped = False

    def pause(self):
        self.stopped = True

    def resume(self):
        self.stopped = False


class Model:
    """A side's model: each batch records which runners were stopped while it ran."""

    def __init__(self, name, seen, runners):
        self.name, self.seen, self.runners = name, seen, runners

    def run_batch(self, count, precision=None, hold=False, into=0):
        if count:
            self.seen.append((self.name if precision is None else "default",
                              {name for name, runner in self.runners.items() if runner.stopped}))
        return SimpleNamespace(rings=[], sequence=False)


class Rounds:
    turn = 0

    def load(self, ring):
        pass

    def candidate_done(self, outputs):
        pass

    def reference_done(self, outputs):
        pass


def test_the_runner_not_timed_is_stopped_and_both_run_after_the_round():
    runners = {"candidate": Runner(), "reference": Runner()}
    seen = []
    context = SimpleNamespace(config=RunConfig(device="cuda", baselines=("default",)), device=torch.device("cuda"),
                              runner=runners["candidate"], reference_runner=runners["reference"], quiet_gpu=None,
                              findings=None)
    plan = BatchPlan(count=2, overhead_ms=0.1, copy_ms=0.0, estimate_ms=1.0, candidate_ring=[], reference_ring=[])
    sides = build_sides(Model("reference", seen, runners), Model("candidate", seen, runners), Rounds(),
                        lambda: None, plan, context)
    assert list(sides) == ["candidate", "reference", "default"]
    for _ in range(2):
        for side in sides.values():
            side.prepare()
            side.inspect(side.call())
        assert not any(runner.stopped for runner in runners.values())
    assert seen == [("candidate", {"reference"}), ("reference", {"candidate"}), ("default", {"candidate"})] * 2
