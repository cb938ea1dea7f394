"""Timing one evaluation: the reference, the candidate and the baselines sampled in interleaved rounds on
fresh input contents, the candidate's timed outputs checked, and the samples turned into a TimingRecord."""

from __future__ import annotations

from dataclasses import dataclass

from kbench import flags, guards, timing, verdicts
from kbench.fresh import FreshRounds
from kbench.job import one_line
from kbench.progress import Context, Stop
from kbench.remote import new_stand_in
from kbench.results import ClockRecord, Status, Timing
from kbench.timed_sides import build_sides, default_is_reference
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
    device = context.device
    context.progress.enter("timing")
    rounds = FreshRounds(make_inputs, reference_model, trials.output_bytes, context)
    timer = _timer(device)
    sides = build_sides(reference_model, candidate_model, rounds, getattr(timer, "flush", timing.do_nothing), context)
    samples, clocks = _sample(sides, timer, rounds, context)
    context.progress.add_seconds("making fresh inputs", rounds.generate_s)
    if getattr(timer, "persisting_l2", None) is not None and timer.persisting_l2.note:
        context.findings.note(timer.persisting_l2.note)
    floor_ms = verdicts.UNCLOCKED_MIN_MS if device.type == "cuda" else verdicts.UNCLOCKED_MIN_MS_CPU
    calibration = context.calibration
    found = verdicts.unclocked_time(samples["candidate"].ms, samples["candidate"].wall_ms,
                                    calibration.ms if calibration else [], calibration.wall_ms if calibration else [],
                                    floor_ms)
    if found:
        context.findings.flag(*found)
        context.findings.raise_if_rejected()
    return _record(samples, clocks, timer.name, context)


def _timer(device):
    return timing.CudaEventTimer(device) if device.type == "cuda" else timing.HostTimer()


# The protocol's own cost is measured over this many rounds of the runner's stand-in (after the warm-up).
CALIBRATION_ROUNDS = 8
CALIBRATION_BUDGET_S = 0.5


def calibrate(runner, problem_path: str, reference, context: Context) -> timing.Samples:
    """The problem's own Model, built in the runner before the candidate is imported, timed under the
    candidate's protocol in a loop shaped like the one that will time the candidate (fresh contents every round,
    the reference between its calls, the runner stopped meanwhile): what the judge's wall clock
    sees beyond the runner's timer when nothing is hidden (verdicts.timing_mismatch). A stand-in of the
    reference's kind matters: its outputs are the candidate's shapes, and its calls last long enough that the
    runner waits for the device, as a real kernel's do."""
    with context.progress.spent("calibrating the runner"):
        stand_in = new_stand_in(runner, problem_path, context.config.policy, reference.init_inputs,
                                context.config.seed, context.overrides)
        timer = _timer(context.device)
        rounds = FreshRounds(reference.make_inputs, reference.model, 0, context, check=False)
        sides = build_sides(reference.model, stand_in, rounds, getattr(timer, "flush", timing.do_nothing), context)
        rule = timing.StopRule(warmup=1, min_samples=CALIBRATION_ROUNDS,
                               max_samples=CALIBRATION_ROUNDS, target_rse=1.0, budget_s=CALIBRATION_BUDGET_S)
        samples = timing.sample_interleaved([sides["candidate"].side, sides["reference"].side], timer, rule,
                                            before_round=rounds.new_round)
    return samples[0]


# The reference's timed calls before the candidate is imported stop after this long, or once their median is
# known to ALONE_TARGET_RSE: plenty beside stats.SLOWDOWN_MIN_RATIO. No warm-up call: the reference's first
# call (the op recording's) came right before.
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
