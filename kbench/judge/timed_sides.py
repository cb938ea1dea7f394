"""The sides the timing loop runs: the candidate (in its runner), the reference and PyTorch's-defaults baseline (in
the reference's runner), each calling its model on input buffers in its runner's arenas, reloaded before every
call; and the torch.compile baseline in the judge."""

from __future__ import annotations

import time
from typing import Callable

import torch

from kbench import policy
from kbench.judge import guards, timing
from kbench.config import PYTORCH_DEFAULT
from kbench.schedule.job import one_line
from kbench.loading import clone
from kbench.judge.progress import Context
from kbench.runner.arenas import refill



def default_is_reference(context: Context) -> bool:
    """PyTorch's defaults differ from strict float32 only in cuDNN's TF32, on a GPU, under the strict policy."""
    return context.device.type != "cuda" or context.config.policy == PYTORCH_DEFAULT


class RemoteTimer:
    """The candidate's call timed by its runner, inside the judge's own clock.

    Before the call the judge loads the inputs into its arenas and flushes L2 (the flush and the contents
    are the judge's doing, so the runner cannot skip them); the judge's wall clock runs from the request to
    the reply, which the runner sends once the device is idle and the outputs are in the judge's arenas. The
    runner's time (CUDA events next to the call, or its host clock on a CPU) counts only as far as the wall
    time bounds it (verdicts.timing_mismatch)."""

    name = "runner"

    def __init__(self, flush: Callable[[], None]):
        self.flush = flush

    def measure(self, call) -> tuple[float, float, object]:
        return call.timed(self.flush)


class RemoteCall:
    """A timed call of a model in a runner: a plain call on `buffers`, or (timed) one with the judge's flush
    before it and the judge's wall clock around it (RemoteTimer). `precision`: the policy the runner calls it
    under (a baseline's), None: the evaluation's."""

    def __init__(self, model, buffers: list, precision: str | None = None):
        self.model = model
        self.buffers = buffers
        self.precision = precision

    def __call__(self):
        return self.model.call(self.buffers)

    def timed(self, flush) -> tuple[float, float, object]:
        message, _ = self.model.stage(self.buffers)  # in place: the buffers are the arenas
        if self.precision:
            message["precision"] = self.precision
        flush()
        synchronize = self.model.runner.device.type == "cuda"
        if synchronize:
            torch.cuda.synchronize(self.model.runner.device)
        started = time.perf_counter()
        output, reply = self.model.send(message, "timed")
        wall_ms = (self.model.received_at - started) * 1e3
        return reply.timed_ms if reply.timed_ms is not None else wall_ms, wall_ms, output


def build_sides(reference_model, timed_reference, candidate_model, rounds, flush,
                context: Context) -> dict[str, timing.Side]:
    """'candidate', 'reference' and the baselines asked for, in the order the timing loop runs them (the
    candidate first: fresh.py). Each side reloads the round's contents (fresh.FreshRounds) into its buffers
    before its call: whatever a call did to them, the next starts from the contents. The candidate's buffers
    are its runner's arenas; the reference and the default baseline share the reference's runner's; the compile
    baseline runs in the judge. While anything but the candidate runs, the candidate's runner is stopped
    (remote_process.RunnerProcess.pause) and, on a GPU, the judge waits until the GPU is free of the work it queued
    (quiet.py)."""
    config = context.config
    candidate_buffers = candidate_model.arena_views(rounds.inputs)
    candidate_side = timing.Side(RemoteCall(candidate_model, candidate_buffers),
                                 prepare=lambda: load_into(candidate_buffers, rounds.inputs),
                                 inspect=rounds.candidate_done, timer=RemoteTimer(flush))
    reference_buffers = timed_reference.arena_views(rounds.inputs)
    reference_inspect = rounds.reference_done if config.guards else timing.do_nothing
    sides = {"candidate": candidate_side,
             "reference": _side(RemoteCall(timed_reference, reference_buffers), reference_buffers, rounds, context,
                                inspect=reference_inspect, timer=RemoteTimer(flush))}
    baseline_inspect = guards.poison if config.guards else timing.do_nothing
    if "default" in config.baselines and not default_is_reference(context):
        sides["default"] = _side(RemoteCall(timed_reference, reference_buffers, precision=PYTORCH_DEFAULT),
                                 reference_buffers, rounds, context, inspect=baseline_inspect, timer=RemoteTimer(flush))
    if "compile" in config.baselines:
        compiled = _compiled_reference(reference_model, rounds.inputs, context)
        if compiled is not None:
            buffers = clone(rounds.inputs)
            sides["compile"] = _side(lambda: compiled(*buffers), buffers, rounds, context, inspect=baseline_inspect)
    return sides


def _side(call, buffers: list, rounds, context: Context, inspect, timer=None) -> timing.Side:
    def prepare():
        load_into(buffers, rounds.inputs)
        context.runner.pause()
        if context.quiet_gpu is not None and not context.quiet_gpu.wait(context.findings):
            context.findings.raise_if_rejected()

    def after(output):
        context.runner.resume()
        inspect(output)
        policy.apply_policy(context.config.policy)  # whatever a baseline changed, the checking policy is back
    return timing.Side(call, prepare=prepare, inspect=after, timer=timer)


def _compiled_reference(reference_model, inputs, context: Context):
    """torch.compile of the reference, compiled here (untimed); None when it does not compile."""
    try:
        compiled = torch.compile(reference_model)
        compiled(*clone(inputs))
        return compiled
    except Exception as error:  # the baseline is missing, which is not the candidate's fault
        print(f"kbench: torch.compile baseline unavailable: {one_line(error)}", flush=True)
        context.findings.note(f"compile baseline unavailable ({one_line(error)})")
        return None


def load_into(buffers: list, inputs: list) -> None:
    """Copy inputs into a side's input buffers (non-tensor arguments stay as they are)."""
    refill(buffers, inputs)
