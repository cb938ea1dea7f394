"""Timing one evaluation: the reference, the candidate and the baselines sampled in interleaved rounds on
fresh input contents, the candidate's timed outputs checked, and the samples turned into a TimingRecord."""

from __future__ import annotations

from dataclasses import dataclass

from kbench import flags, guards, stats, timing
from kbench.fresh import FreshRounds
from kbench.job import one_line
from kbench.progress import Context, Stop
from kbench.results import ClockRecord, Status, Timing
from kbench.timed_sides import build_sides, default_is_reference, graph_sides
from kbench.trials import TrialsResult


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
    """Time the sides on fresh contents every round (fresh.py), the candidate's outputs checked against the
    reference's for the same contents."""
    config, device = context.config, context.device
    context.progress.enter("timing")
    rounds = FreshRounds(make_inputs, reference_model, trials.output_bytes, context)
    sides = build_sides(reference_model, candidate_model, rounds, context)
    timer = timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()
    timer_name = timer.name
    graph = graph_sides(sides, timer, make_inputs(config.seed + 200), context) \
        if config.cuda_graph and device.type == "cuda" else None
    if graph:
        sides, timer_name = graph.sides, "cuda-graph"
    samples, clocks = _sample(sides, timer, rounds, context)
    context.progress.add_seconds("making fresh inputs", rounds.generate_s)
    if getattr(timer, "persisting_l2", None) is not None and timer.persisting_l2.note:
        context.findings.note(timer.persisting_l2.note)
    if config.guards and device.type == "cuda":
        # Events and wall times as taken (per replay under --cuda-graph): only their gap matters.
        hidden = guards.hidden_work_message(samples["reference"].ms, samples["reference"].wall_ms,
                                            samples["candidate"].ms, samples["candidate"].wall_ms)
        if hidden:
            context.findings.flag(flags.SIDE_STREAM, hidden)
    if graph:
        samples = graph.per_call(samples)
    return _record(samples, clocks, timer_name, context)


# The reference's timed calls before the candidate is imported stop after this long, or once their median is
# known to ALONE_TARGET_RSE: plenty beside stats.SLOWDOWN_MIN_RATIO. No warm-up call: the reference's first
# call (the snapshot's probe) came right before.
ALONE_BUDGET_S = 0.25
ALONE_TARGET_RSE = 0.03


def time_alone(reference_model, make_inputs, context: Context) -> Timing:
    """The reference's time before the candidate is imported: what no candidate can have slowed."""
    config, device = context.config, context.device
    inputs = make_inputs(config.seed + 100)
    side = timing.Side(lambda: reference_model(*inputs), inspect=guards.poison)
    timer = timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()
    rule = timing.StopRule(warmup=0, min_samples=3, max_samples=config.max_samples, target_rse=ALONE_TARGET_RSE,
                           budget_s=min(ALONE_BUDGET_S, config.time_budget_s))
    try:
        samples, = timing.sample_interleaved([side], timer, rule)
    except Exception as error:
        raise Stop(Status.REFERENCE_ERROR, f"reference failed while timed alone: {one_line(error)}")
    return Timing(tuple(samples.ms), timer.name, tuple(samples.others_cpu_ms))


def _sample(sides: dict, timer, rounds: FreshRounds, context: Context) -> tuple[dict, ClockRecord | None]:
    """Samples per side, and the GPU's clocks while they were taken."""
    config, device = context.config, context.device
    rule = timing.StopRule(warmup=config.warmup, min_samples=config.min_samples, max_samples=config.max_samples,
                           target_rse=config.target_rse, budget_s=config.time_budget_s)
    clock_log = timing.ClockLog(timing.nvml_clock_reader(device)) if device.type == "cuda" else None
    try:
        samples = timing.sample_interleaved([timed.side for timed in sides.values()], timer, rule,
                                            clock_log=clock_log, before_round=rounds.new_round)
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
    reference_samples = samples.pop("reference")
    reference = Timing(tuple(reference_samples.ms), timer_name, tuple(reference_samples.others_cpu_ms))
    candidate = Timing(tuple(samples.pop("candidate").ms), timer_name)
    baselines = {name: Timing(tuple(side_samples.ms), timer_name) for name, side_samples in samples.items()}
    if "default" in context.config.baselines and default_is_reference(context):
        baselines["default"] = reference
    return TimingRecord(reference, candidate, tuple(baselines.items()), clocks)


def slowed_reference_message(alone: Timing, during: Timing) -> str | None:
    """Why the reference timed beside the candidate (`during`) looks slowed from outside it, next to its time
    alone before the candidate was imported; None when it does not. Its median time grew beyond what noise and
    its own levels allow (stats.slowdown), or other threads of the process used CPU while it ran that they
    did not use before (stats.busy_others): a thread of the candidate's."""
    reasons = []
    ratio = stats.slowdown(alone.samples_ms, during.samples_ms)
    if ratio is not None:
        reasons.append(f"the reference ran {ratio:.1f}x slower once the candidate was loaded (median "
                       f"{during.median_ms:.3g} ms against {alone.median_ms:.3g} ms before it was imported)")
    extra = stats.busy_others(alone.samples_ms, alone.others_cpu_ms, during.others_cpu_ms)
    if extra is not None:
        reasons.append(f"other threads of the process used {extra:.3g} ms more CPU per call of the reference "
                       f"once the candidate was loaded (median {during.others_cpu_median_ms:.3g} ms against "
                       f"{alone.others_cpu_median_ms:.3g} ms before it was imported, for a {alone.median_ms:.3g} ms "
                       f"call)")
    return "; ".join(reasons) or None
