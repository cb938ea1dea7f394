"""Models built in their runners: ModelNew in the candidate's (every instance, the trials', the timed one and the
sweep's, built the same way) and the problem's own Model in the reference's, each right after the seed the judge's
reference was built after."""

from __future__ import annotations

from typing import Callable

from kbench.judge.output_room import OutputRoom
from kbench.judge.remote import RemoteModel
from kbench.judge.remote_process import RunnerProcess


def new_candidate(runner: RunnerProcess, init_inputs: list, seed: int, overrides: dict,
                  room: OutputRoom, precision: str = "float32") -> RemoteModel:
    """ModelNew(*init_inputs) built in the runner right after `seed` and cast to `precision`, as the reference was,
    at the sizes `overrides` set (the runner's copy of the problem follows them); the runner's earlier instances
    go. Every instance, the official trials', the timed one and the sweep's, is built by this alone, under a random
    name. Its outputs get the `room` the reference's need at these sizes, reserved before it is built."""
    model = RemoteModel(runner, runner.new_instance(), room=room)
    model.reserve_output_room()
    return model.begin("build", init_inputs, seed, overrides, precision=precision)()


def begin_stand_in(runner: RunnerProcess, problem_path: str, policy: str, init_inputs: list, seed: int,
                   overrides: dict, log_path: str = "", precision: str = "float32") -> Callable[[], RemoteModel]:
    """Start building the problem's own Model in the reference's runner, right after `seed` as the judge's was:
    the reference the timing loop times (measure.py). Returns what waits for it, so the judge can run its own
    reference meanwhile. The runner's output goes to `log_path` from then on."""
    return RemoteModel(runner, "stand_in", of_reference=True).begin(
        "stand_in", init_inputs, seed, overrides, problem=problem_path, policy=policy, log_path=log_path,
        precision=precision)
