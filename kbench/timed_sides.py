"""The sides the timing loop runs: the candidate, the reference and the baselines, each calling its model on
one shared set of input buffers that is reloaded before every call; under --cuda-graph, each captured as a
graph."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import torch

from kbench import check, guards, policy, stats, timing
from kbench.config import PYTORCH_DEFAULT
from kbench.job import one_line
from kbench.loading import clone, clone_output
from kbench.progress import Context

# Under --cuda-graph each timed replay repeats the call until it lasts about this long, so the events'
# own overhead is spread over the repeats. The timer flushes L2 before each replay; inside the graph an L2
# flush runs between the calls, timed as a side of its own and subtracted.
GRAPH_REPLAY_MS = 0.5
MAX_GRAPH_REPEATS = 100
FLUSH_REPEATS = 10


@dataclass
class TimedSide:
    side: timing.Side                       # what the sampling loop runs
    settings: Callable[[], None] | None     # precision settings of this side (a baseline's), None: the policy's
    buffers: list                           # the input buffers its call reads (the same list for every side)


def default_is_reference(context: Context) -> bool:
    """PyTorch's defaults differ from strict float32 only in cuDNN's TF32, on a GPU, under the strict policy."""
    return context.device.type != "cuda" or context.config.policy == PYTORCH_DEFAULT


def build_sides(reference_model, candidate_model, rounds, context: Context) -> dict[str, TimedSide]:
    """'candidate', 'reference' and the baselines asked for, in the order the timing loop runs them (the
    candidate first: fresh.py). They share one set of input buffers, which each side reloads with the round's
    contents (fresh.FreshRounds) before its call: whatever a call did to them, the next starts from the
    contents, and a problem whose inputs take tens of gigabytes needs room for two sets, not one per side."""
    config = context.config
    buffers = clone(rounds.inputs)
    reference_inspect = guards.poison if config.guards else timing.do_nothing
    sides = {"candidate": _side(candidate_model, buffers, rounds, context, inspect=rounds.candidate_done),
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

    def after(output):
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


def call_on(timed: TimedSide, inputs: list):
    """A copy of the side's output for `inputs`, loaded into its buffers, under its settings."""
    load_into(timed.buffers, inputs)
    if timed.settings:
        timed.settings()
    return clone_output(timed.side.call())


@dataclass
class GraphSides:
    sides: dict                # name -> TimedSide whose call replays a graph, and "flush"
    repeats: dict[str, int]    # calls per replay, per side

    def per_call(self, samples: dict) -> dict:
        """Milliseconds per call: each replay's time less the flushes between its calls, over its calls."""
        flush = samples.pop("flush")
        flush_ms = stats.median(flush.ms) / self.repeats["flush"]
        return {name: timing.Samples(ms=[(ms - (self.repeats[name] - 1) * flush_ms) / self.repeats[name]
                                         for ms in side_samples.ms], wall_ms=side_samples.wall_ms,
                                     others_cpu_ms=[ms / self.repeats[name] for ms in side_samples.others_cpu_ms])
                for name, side_samples in samples.items()}


def graph_sides(sides: dict, timer, probe_inputs: list, context: Context) -> GraphSides | None:
    """Every side's call captured as a CUDA graph; None (timed without graphs, with a note) when any
    side cannot be captured or its replay does not compute what the call computed before capture.

    The check uses inputs of its own (`probe_inputs`): a replay that computes nothing returns what
    the capture left behind, which matches no other inputs. Kernels launched outside the captured
    stream (the legacy default stream, say) go missing from a graph without any error.
    """
    captured, repeats = {}, {}
    for name, timed in sides.items():
        try:
            captured[name], repeats[name] = _captured(timed, timer, probe_inputs, context)
        except Exception as error:
            torch.cuda.synchronize()
            policy.apply_policy(context.config.policy)
            context.findings.note(f"timed without CUDA graphs: {name} could not be captured ({one_line(error)})")
            return None
        policy.apply_policy(context.config.policy)
    flush = timing.capture_graph(timer.flush, FLUSH_REPEATS, warmup=0)
    captured["flush"] = TimedSide(timing.Side(flush), None, [])
    repeats["flush"] = FLUSH_REPEATS
    return GraphSides(captured, repeats)


def _captured(timed: TimedSide, timer, probe_inputs: list, context: Context) -> tuple[TimedSide, int]:
    """The side replaying a graph of `repeats` calls, and `repeats`; raises when its replay is wrong."""
    expected = call_on(timed, probe_inputs)  # before any capture: what the call computes
    timed.side.prepare()  # inputs loaded and the side's settings applied, as for a timed call
    call_ms, _, _ = timer.measure(timed.side.call)  # one plain call sizes the repeats
    repeats = max(1, min(MAX_GRAPH_REPEATS, math.ceil(GRAPH_REPLAY_MS / max(call_ms, 1e-3))))
    replay = timing.capture_graph(timed.side.call, repeats, between=timer.flush)
    graphed = replace(timed, side=replace(timed.side, call=replay))
    outcome = check.compare(call_on(graphed, probe_inputs), expected, context.config.tolerance_for)
    if not outcome.passed:
        raise RuntimeError(f"its replay does not compute what the call does: {outcome.mismatch}")
    return graphed, repeats
