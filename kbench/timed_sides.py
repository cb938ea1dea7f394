"""The sides the timing loop runs: the candidate (in its runner), the reference and the baselines, each calling
its model on one shared set of input buffers that is reloaded before every call."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from kbench import guards, policy, timing
from kbench.config import PYTORCH_DEFAULT
from kbench.job import one_line
from kbench.loading import clone
from kbench.progress import Context



@dataclass
class TimedSide:
    side: timing.Side                       # what the sampling loop runs
    settings: Callable[[], None] | None     # precision settings of this side (a baseline's), None: the policy's
    buffers: list                           # the input buffers its call reads (the same list for every side)


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
    """The candidate's timed call: a plain call of the model in the runner on `buffers`, or (timed) one with
    the judge's flush before it and the judge's wall clock around it (RemoteTimer)."""

    def __init__(self, model, buffers: list):
        self.model = model
        self.buffers = buffers

    def __call__(self):
        return self.model.call(self.buffers, write_back=False)

    def timed(self, flush) -> tuple[float, float, object]:
        message, _ = self.model.stage(self.buffers)  # in place: the buffers are the arenas
        flush()
        synchronize = self.model.runner.device.type == "cuda"
        if synchronize:
            torch.cuda.synchronize(self.model.runner.device)
        started = time.perf_counter()
        output, reply = self.model.send(message, "timed")
        wall_ms = (self.model.received_at - started) * 1e3
        return reply.timed_ms if reply.timed_ms is not None else wall_ms, wall_ms, output


def build_sides(reference_model, candidate_model, rounds, flush, context: Context) -> dict[str, TimedSide]:
    """'candidate', 'reference' and the baselines asked for, in the order the timing loop runs them (the
    candidate first: fresh.py). They share one set of input buffers, which each side reloads with the round's
    contents (fresh.FreshRounds) before its call: whatever a call did to them, the next starts from the
    contents. The candidate's set is in the judge's arenas; the reference and the baselines share one of the
    judge's own. While the reference and the baselines run, the runner is stopped (remote_process.RunnerProcess.pause)."""
    config = context.config
    buffers = clone(rounds.inputs)
    reference_inspect = guards.poison if config.guards else timing.do_nothing
    # The candidate's buffers are the judge's arenas (its runner reads them in place); the reference's are the
    # judge's own, which nothing of the candidate's can reach while the reference runs.
    arena_buffers = candidate_model.arena_views(rounds.inputs)
    candidate_side = timing.Side(RemoteCall(candidate_model, arena_buffers),
                                 prepare=lambda: load_into(arena_buffers, rounds.inputs),
                                 inspect=rounds.candidate_done, timer=RemoteTimer(flush))
    sides = {"candidate": TimedSide(candidate_side, None, arena_buffers),
             "reference": _side(reference_model, buffers, rounds, context,
                                inspect=rounds.reference_done if config.guards else timing.do_nothing)}
    if "default" in config.baselines and not default_is_reference(context):
        sides["default"] = _side(reference_model, buffers, rounds, context, inspect=reference_inspect,
                                 settings=policy.set_pytorch_default_precision)
    if "compile" in config.baselines:
        compiled = _compiled_reference(reference_model, rounds.inputs, context)
        if compiled is not None:
            sides["compile"] = _side(compiled, buffers, rounds, context, inspect=reference_inspect)
    return sides


def _side(model, buffers: list, rounds, context: Context, inspect, settings=None) -> TimedSide:
    def prepare():
        load_into(buffers, rounds.inputs)
        if settings:
            settings()
        context.runner.pause()

    def after(output):
        context.runner.resume()
        inspect(output)
        policy.apply_policy(context.config.policy)  # whatever a baseline changed, the checking policy is back
    return TimedSide(timing.Side(lambda: model(*buffers), prepare=prepare, inspect=after), settings, buffers)


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
    for buffer, source in zip(buffers, inputs):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(source)
