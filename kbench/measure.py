"""Timing one evaluation: the reference, the candidate and the baselines sampled in interleaved rounds on
rotating input sets, the candidate's timed outputs checked, and the samples turned into a TimingRecord."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import torch

from kbench import check, flags, guards, timing
from kbench.job import one_line
from kbench.loading import call_reference, tensor_bytes
from kbench.progress import Context, Stop
from kbench.results import ClockRecord, Status, Timing
from kbench.timed_sides import build_sides, default_is_reference, graph_sides
from kbench.trials import TrialsResult, guard_output

# Timed outputs up to this size are all checked; larger ones on a random sample of calls.
CHECK_EVERY_CALL_BYTES = 64 << 20
CHECK_PROBABILITY = 0.25


@dataclass(frozen=True)
class TimingRecord:
    """The Outcome's timing fields."""

    reference_timing: Timing
    candidate_timing: Timing
    baselines: tuple[tuple[str, Timing], ...]
    clocks: ClockRecord | None

    def fields(self) -> dict:
        return {"reference_timing": self.reference_timing, "candidate_timing": self.candidate_timing,
                "baselines": self.baselines, "clocks": self.clocks}


def measure(reference_model, candidate_model, make_inputs, trials: TrialsResult, context: Context) -> TimingRecord:
    """Time the sides. With guards on, timed calls rotate through several input sets loaded into the same
    buffers, the candidate's outputs are checked against the reference's for those inputs (a random sample
    of calls when outputs are large), and reference outputs are poisoned before they are freed."""
    config, device = context.config, context.device
    context.progress.enter("timing")
    rotation = rotation_size(trials.input_bytes, trials.output_bytes, len(config.baselines) + 1,
                             free_bytes(device)) if config.guards else 1
    input_sets = [make_inputs(config.seed + 100 + index) for index in range(rotation)]
    checker = TimedOutputChecker([call_reference(reference_model, inputs, device) for inputs in input_sets],
                                 context) if config.guards else None
    sides = build_sides(reference_model, candidate_model, input_sets,
                        checker.inspect if checker else timing.do_nothing,
                        checker.track if checker else lambda index: None, context)
    timer = timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()
    timer_name = timer.name
    graph = graph_sides(sides, timer, make_inputs(config.seed + 200), context) \
        if config.cuda_graph and device.type == "cuda" else None
    if graph:
        sides, timer_name = graph.sides, "cuda-graph"
    samples, clocks = _sample(sides, timer, context)
    if config.guards and device.type == "cuda":
        # Events and wall times as taken (per replay under --cuda-graph): only their gap matters.
        hidden = guards.hidden_work_message(samples["reference"].ms, samples["reference"].wall_ms,
                                            samples["candidate"].ms, samples["candidate"].wall_ms)
        if hidden:
            context.findings.flag(flags.SIDE_STREAM, hidden)
    if graph:
        samples = graph.per_call(samples)
    return _record(samples, clocks, timer_name, context)


def _sample(sides: dict, timer, context: Context) -> tuple[dict, ClockRecord | None]:
    """Samples per side, and the GPU's clocks while they were taken."""
    config, device = context.config, context.device
    rule = timing.StopRule(warmup=config.warmup, min_samples=config.min_samples, max_samples=config.max_samples,
                           target_rse=config.target_rse, budget_s=config.time_budget_s)
    clock_log = timing.ClockLog(timing.nvml_clock_reader(device)) if device.type == "cuda" else None
    try:
        samples = timing.sample_interleaved([timed.side for timed in sides.values()], timer, rule,
                                            clock_log=clock_log)
    except Stop:
        raise
    except Exception as error:
        raise Stop(Status.RUNTIME_ERROR, f"failed while timing: {one_line(error)}")
    context.findings.raise_if_rejected()
    return dict(zip(sides, samples)), ClockRecord.from_readings(clock_log.readings) if clock_log else None


def _record(samples: dict, clocks: ClockRecord | None, timer_name: str, context: Context) -> TimingRecord:
    throttled = guards.throttle_message(clocks)
    if throttled:
        context.findings.flag(flags.THROTTLED, throttled)
    reference = Timing(tuple(samples.pop("reference").ms), timer_name)
    candidate = Timing(tuple(samples.pop("candidate").ms), timer_name)
    baselines = {name: Timing(tuple(side_samples.ms), timer_name) for name, side_samples in samples.items()}
    if "default" in context.config.baselines and default_is_reference(context):
        baselines["default"] = reference
    return TimingRecord(reference, candidate, tuple(baselines.items()), clocks)


class TimedOutputChecker:
    """Checks outputs produced inside the timing loop against the reference for the same inputs."""

    def __init__(self, expected: list, context: Context):
        self.expected = expected
        self.context = context
        self.current = 0
        self.calls = 0
        # Unpredictable to the candidate: it cannot tell which calls are checked.
        self.random = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.check_all = max((tensor_bytes(output) for output in expected), default=0) <= CHECK_EVERY_CALL_BYTES

    def track(self, index: int) -> None:
        """The candidate's next call reads input set `index`."""
        self.current = index

    def inspect(self, output) -> None:
        self.calls += 1
        if not (self.check_all or self.calls <= 2 or self.random.random() < CHECK_PROBABILITY):
            return
        findings = self.context.findings
        guard_output(self.context, output)
        findings.raise_if_rejected()
        outcome = check.compare(output, self.expected[self.current], self.context.config.tolerance_for)
        if not outcome.passed:
            findings.flag(flags.STALE_OUTPUT, f"timed call {self.calls} returned a wrong output for its "
                                              f"inputs (memoised or skipped work): {outcome.mismatch}")
            raise Stop(Status.REJECTED, "; ".join(findings.flag_messages))


def rotation_size(input_bytes: int, output_bytes: int, sides: int, free_bytes: int | None) -> int:
    """How many input sets the timing loop rotates through: 3, fewer when GPU memory is tight
    (free_bytes: what the device has free; None on a CPU, where memory is not the limit).

    Each set holds its inputs and the reference's outputs for them. Besides the sets, each timed side
    has input buffers of its own, and a call's output, the output being checked and the comparison's
    workspace are alive at once (an output can be 8x its inputs: conv2d's official size).
    """
    if free_bytes is None:
        return 3
    alongside = sides * input_bytes + 2 * output_bytes + check.COMPARE_WORKSPACE_BYTES
    for count in (3, 2):
        if alongside + count * (input_bytes + output_bytes) < 0.8 * free_bytes:
            return count
    return 1


def free_bytes(device) -> int | None:
    """Device memory this process can still use: the driver's free memory plus torch's unused cache."""
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
