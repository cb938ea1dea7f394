"""Timing one evaluation: the reference, the candidate and the baselines sampled in interleaved rounds on
fresh input contents, the candidate's timed outputs checked, and the samples turned into a TimingRecord. The
reference and the candidate are timed alike, each in its runner: what the judge's clock sees beyond the
reference's timer is the protocol's own cost, against which the candidate's is judged (verdicts.unclocked_time)."""

from __future__ import annotations

from dataclasses import dataclass

from kbench import flags, stats
from kbench.judge import guards, timing, verdicts
from kbench.judge.fresh import FreshRounds
from kbench.schedule.job import one_line
from kbench.judge.progress import Context, Stop
from kbench.results import ClockRecord, Status, Timing
from kbench.judge.timed_sides import RemoteCall, RemoteTimer, build_sides, default_is_reference
from kbench.judge.trials import TrialsResult


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


def measure(reference_model, timed_reference, candidate_model, make_inputs, trials: TrialsResult,
            context: Context) -> TimingRecord:
    """Time the reference (the Model in its own runner) and the candidate (in theirs) under one protocol, on
    fresh contents every round (fresh.py), the candidate's outputs checked against the reference's for the same
    contents. `reference_model` is the judge's own (the float64 truth of a timed output that fails)."""
    device = context.device
    context.progress.enter("timing")
    rounds = FreshRounds(make_inputs, reference_model, trials.output_bytes, context)
    timer = _timer(device)
    flush = getattr(timer, "flush", timing.do_nothing)
    sides = build_sides(reference_model, timed_reference, candidate_model, rounds, flush, context)
    floor_ms = verdicts.UNCLOCKED_MIN_MS if device.type == "cuda" else verdicts.UNCLOCKED_MIN_MS_CPU
    samples, clocks = _sample(sides, timer, rounds, context)
    bound, found = _judge_clock(samples, floor_ms)
    if found:
        # Work hidden from the candidate's timer shows in every pass; a busy host's scheduling seldom twice. The
        # second pass's samples and finding stand, so a candidate that hides work in one pass only gains nothing.
        context.progress.enter("timing again")
        samples, clocks = _sample(sides, timer, rounds, context)
        bound, found = _judge_clock(samples, floor_ms)
    context.progress.add_seconds("making fresh inputs", rounds.generate_s)
    if context.quiet_gpu is not None and context.quiet_gpu.busy_waits:
        context.findings.note(context.quiet_gpu.describe())
    if getattr(timer, "persisting_l2", None) is not None and timer.persisting_l2.note:
        context.findings.note(timer.persisting_l2.note)
    candidate, reference = samples["candidate"], samples["reference"]
    if found:
        context.findings.flag(*found)
        context.findings.raise_if_rejected()
    unverified = None if found else verdicts.unverified_gain(bound, stats.median(reference.ms))
    for warning in (unverified, verdicts.noisy_timing(reference.ms, candidate.ms)):
        if warning:
            context.findings.flag(*warning)
    return _record(samples, clocks, timer.name, context)


def _timer(device):
    return timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()


# The reference's timed calls before the candidate is imported stop after this long (but never before
# timing.MIN_SAMPLES_ALWAYS), or once their median is known to ALONE_TARGET_RSE: plenty beside
# stats.SLOWDOWN_MIN_RATIO, a 2x shift clear of both samples' spread. Every evaluation waits for them. One
# warm-up call: the Model in the reference's runner has not run yet.
ALONE_BUDGET_S = 0.03
ALONE_TARGET_RSE = 0.03


def time_alone(timed_reference, make_inputs, context: Context) -> Timing:
    """The reference's time in its runner before the candidate is imported: what no candidate can have slowed."""
    config = context.config
    timer = _timer(context.device)
    inputs = make_inputs(config.seed + 100)
    call = RemoteCall(timed_reference, timed_reference.arena_views(inputs))
    side = timing.Side(call, timer=RemoteTimer(getattr(timer, "flush", timing.do_nothing)))
    rule = timing.StopRule(warmup=1, min_samples=3, max_samples=config.max_samples, target_rse=ALONE_TARGET_RSE,
                           budget_s=min(ALONE_BUDGET_S, config.time_budget_s))
    try:
        samples, = timing.sample_interleaved([side], timer, rule)
    except Stop:
        raise
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
        samples = timing.sample_interleaved(list(sides.values()), timer, rule,
                                            clock_log=clock_log, before_round=rounds.new_round)
    except Stop:
        raise
    except Exception as error:
        raise Stop(Status.RUNTIME_ERROR, f"failed while timing: {one_line(error)}")
    context.findings.raise_if_rejected()
    return dict(zip(sides, samples)), ClockRecord.from_readings(clock_log.readings) if clock_log else None


def _judge_clock(samples: dict, floor_ms: float) -> tuple[verdicts.ClockBound, tuple[str, str] | None]:
    """The judge's bound on the candidate's times in one pass, and what it finds (verdicts.unclocked_time)."""
    candidate, reference = samples["candidate"], samples["reference"]
    bound = verdicts.clock_bound(candidate.ms, candidate.wall_ms, reference.ms, reference.wall_ms, floor_ms)
    print(f"kbench: judge's clock: {bound.describe()}", flush=True)  # the evaluation's log
    return bound, verdicts.unclocked_time(candidate.ms, candidate.wall_ms, bound)


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
