"""Timing one evaluation: the reference, the candidate and the baselines sampled in interleaved rounds of batches
on fresh input contents (timed_sides.py, sides.py, fresh.py), the candidate's timed outputs checked, and the
samples turned into a TimingRecord. Every side is timed alike, by the judge's own clock around its batches."""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass, replace
from typing import Callable, TypeVar

import torch

from kbench import flags, policy, stats, verdicts
from kbench.judge import guards, timing
from kbench.judge.fresh import FreshRounds
from kbench.failures import Evidence, Kind, Party, Stop, one_line
from kbench.judge.progress import Context
from kbench.judge.runner_lost import RunnerDied
from kbench.runner.held import HoldUnusable
from kbench.results import ClockRecord, Timing
from kbench.judge.sides import BatchTimer, build_sides, compiled_reference, default_is_reference, rebased
from kbench.judge.timed_sides import (copies_ms, fixed_cost, output_sizes, plan_batches, reference_batches,
                                      ring_room)
from kbench.judge.trials import TrialsResult
from kbench.processes import on_one_cpu

T = TypeVar("T")


@dataclass(frozen=True)
class TimingRecord:
    """The Outcome's timing fields."""

    reference_timing: Timing
    candidate_timing: Timing
    baselines: tuple[tuple[str, Timing], ...]
    clocks: ClockRecord | None
    held: bool = False         # the batches' outputs were read where the calls left them (else copied into slots)
    slot_copy_ms: float = 0.0  # the judge's copy of one call's outputs (what a runner's copy of them costs)

    def fields(self) -> dict:
        return {"reference_timing": self.reference_timing, "candidate_timing": self.candidate_timing,
                "baselines": self.baselines, "clocks": self.clocks}


def measure(reference_model, timed_reference, candidate_model, make_inputs, trials: TrialsResult,
            context: Context) -> TimingRecord:
    """Time the reference (the Model in its own runner) and the candidate (in theirs) in batches under one protocol,
    on fresh contents every round (fresh.py), the candidate's outputs checked against the reference's for the same
    contents. `reference_model` is the judge's own (the ring's output sizes; the float64 truth of a timed output
    that fails)."""
    config, device = context.config, context.device
    context.progress.enter("timing")
    rounds = FreshRounds(make_inputs, reference_model, trials.output_bytes, context)
    l2 = timing.CudaEventTimer(device) if device.type == "cuda" else None
    flush = _flush(l2, device)
    compiled = None

    def timed(hold: bool) -> tuple:
        nonlocal compiled
        rounds.hold = hold
        plan = plan_batches(reference_model, timed_reference, candidate_model, rounds, flush, context, hold)
        if compiled is None and "compile" in config.baselines:
            compiled = compiled_reference(reference_model, rounds.sets[0], context)
        sides = build_sides(timed_reference, candidate_model, rounds, flush, plan, context, compiled)
        samples, clocks = _sample(sides, rounds, context, warmup=0 if plan.count == 1 else 1)
        return plan, sides, _fixed_cost_bounded(samples, sides, plan.fixed_ms, context), clocks
    try:
        with _taking_turns_on_one_cpu(context):
            (plan, sides, samples, clocks), _ = _holding_if_possible(timed, context)
    except (Stop, RunnerDied):  # a runner lost: evaluation._decided tells whose, verdicts.decide blames
        raise
    except Exception as error:
        raise Stop(Evidence(Party.CANDIDATE, Kind.RAISED, f"failed while timing: {one_line(error)}"))
    finally:
        candidate_model.close_held()
        timed_reference.close_held()
    context.progress.add_seconds("making fresh inputs", rounds.generate_s)
    if context.quiet_gpu is not None and context.quiet_gpu.busy_waits:
        context.findings.note(context.quiet_gpu.describe())
    if l2 is not None and l2.persisting_l2 is not None and l2.persisting_l2.note:
        context.findings.note(l2.persisting_l2.note)
    candidate, reference = samples["candidate"], samples["reference"]
    load = {name: (side.timer.cpu_s, side.timer.wall_s) for name, side in sides.items()
            if name in ("candidate", "reference") and side.timer.runner is not None}
    if load:  # the evaluation's log
        print("kbench: CPU time of each runner over its batches' wall time: " + ", ".join(
            f"{name} {cpu_s:.3g} s / {wall_s:.3g} s" for name, (cpu_s, wall_s) in load.items()), flush=True)
    print("kbench: median batch wall time, fixed cost subtracted, calls per batch: " + ", ".join(  # the log
        f"{name} {statistics.median(samples[name].wall_ms):.4g} ms, {side.timer.fixed_ms:.4g} ms, {side.timer.count}"
        for name, side in sides.items() if samples[name].wall_ms), flush=True)
    replies = {name: side.timer.reply_ms[-len(samples[name].wall_ms):]  # the sampled batches (warm-ups came first)
               for name, side in sides.items() if side.timer.reply_ms and samples[name].wall_ms}
    print("kbench: median ms from the request to the runner's reply, of the batch wall: " + ", ".join(  # the log
        f"{name} {statistics.median(reply_ms):.4g}" for name, reply_ms in replies.items()), flush=True)
    gain = verdicts.unverified_gain(plan.resolution_ms, stats.median(reference.ms), stats.median(candidate.ms))
    for warning in (gain, verdicts.noisy_timing(reference.ms, candidate.ms), verdicts.uneven_load(load)):
        if warning:
            context.findings.flag(*warning)
    return replace(_record(samples, clocks, context), held=plan.hold, slot_copy_ms=plan.slot_copy_ms)


def _holding_if_possible(attempt: Callable[[bool], T], context: Context) -> tuple[T, bool]:
    """`attempt(hold)` with the batches' outputs held (runner/held.py) on a GPU, and again with them copied into the
    ring's slots where they cannot be (HoldUnusable; a CPU always copies): what it returned, and whether they were
    held."""
    if context.device.type == "cuda":
        try:
            return attempt(True), True
        except HoldUnusable as reason:
            _back_to_copies(reason, context)
    return attempt(False), False


def _back_to_copies(reason: HoldUnusable, context: Context) -> None:
    """After a batch whose outputs could not be read where its calls left them: both runners awake again (the
    batch may have ended with the other one stopped), the checking policy back, and the evaluation's log and notes
    say why the timing starts over with outputs copied into the ring's slots, on every side alike."""
    context.runner.resume()
    if context.reference_runner is not None:
        context.reference_runner.resume()
    policy.apply_policy(context.config.policy)
    print(f"kbench: outputs read where the calls left them could not be used ({reason}); timing again with outputs "
          f"copied into the ring's slots", flush=True)
    context.findings.note(f"timed with outputs copied into slots ({reason})")


def _fixed_cost_bounded(samples: dict, sides: dict, fixed_ms: float, context: Context) -> dict:
    """A batch of real calls costs the fixed cost and more: where the fastest batch of a side timed with it took
    less, the calibration caught a busy moment (its calls would read 0 ms). The fixed cost is then bounded by that
    batch, every such side's times taken again from their walls, and the times flagged `noisy_timing`."""
    timed = [name for name, side in sides.items() if side.timer.fixed_ms == fixed_ms and samples[name].wall_ms]
    fastest = min((min(samples[name].wall_ms) for name in timed), default=fixed_ms)
    if fastest >= fixed_ms:
        return samples
    context.findings.flag(flags.NOISY_TIMING, (
        f"the judge's fixed cost per batch ({fixed_ms:.3g} ms) read more than a whole batch took ({fastest:.3g} ms): "
        f"a busy machine; re-run on a quiet one before trusting the speedup"))
    return {name: rebased(side_samples, fastest, sides[name].timer.count) if name in timed else side_samples
            for name, side_samples in samples.items()}


# The reference's timed batches before the candidate is imported stop after this long (but never before
# timing.MIN_SAMPLES_ALWAYS rounds), or once their medians are known to ALONE_TARGET_RSE: plenty beside
# stats.SLOWDOWN_MIN_RATIO, a 2x shift clear of both samples' spread. Every evaluation waits for them.
ALONE_BUDGET_S = 0.03
ALONE_TARGET_RSE = 0.03
# Input sets of the time alone, where the memory holds them, and the calls of its longer batch: at most that many,
# at least two, and as many as a batch of one call goes into ALONE_BATCH_MS (a long call needs no more to be told
# from what a batch costs once, and eight of it would make every evaluation wait).
ALONE_CALLS = 8
ALONE_BATCH_MS = 10.0
# Batches of one call whose fastest sizes the longer batch: the first on a ring is cold (on a GPU the judge opens
# the runner's memory in it), and sized by it alone the longer batch held two calls.
SIZING_BATCHES = 3


def time_alone(timed_reference, make_inputs, context: Context, whole_batches: bool = False) -> tuple[Timing, bool]:
    """The reference's time in its runner before the candidate is imported, what no candidate can have slowed,
    timed as the timing loop times it (its clock, L2 flushed, the candidate's runner stopped, each call on an input
    set of its own); and whether the outputs were held (read where the calls left them), as the timing loop's are
    unless a side cannot hold them. `whole_batches`: each batch's whole cost counts (_batches_of_one), as it does in
    the timing loop's batches, where another process's GPU work delays each batch once (the test of a suspected
    slowdown, reference_side.check_slowed_reference)."""
    config, device = context.config, context.device
    l2 = timing.CudaEventTimer(device) if device.type == "cuda" else None
    flush = _flush(l2, device)
    inputs = make_inputs(config.seed + 100)
    try:
        sizes = output_sizes(timed_reference.call(inputs))  # also its first call (a warm-up)
        room = min(ALONE_CALLS, ring_room(inputs, sizes, device))
        sets, rings = [inputs], {}

        def ring_of(count: int) -> list:
            """The ring, grown to `count` input sets where the room holds them (it never shrinks), loaded once for
            each size."""
            while len(sets) < min(count, room):
                sets.append(make_inputs(config.seed + 100 + len(sets)))
            if len(sets) not in rings:
                rings[len(sets)] = timed_reference.load_ring(sets, sizes)
            return rings[len(sets)]

        if whole_batches:
            def attempt(hold: bool) -> timing.Samples:
                return _batches_of_one(timed_reference, ring_of(2), flush, hold, context)
        else:
            def attempt(hold: bool) -> timing.Samples:
                return _alone(timed_reference, ring_of, flush, hold, context)
        with _taking_turns_on_one_cpu(context):  # as the timing loop times it
            samples, held = _holding_if_possible(attempt, context)
    except (Stop, RunnerDied):  # a runner lost: evaluation._decided tells whose, verdicts.decide blames
        raise
    except Exception as error:
        raise Stop(Evidence(Party.REFERENCE, Kind.RAISED, f"reference failed while timed alone: {one_line(error)}"))
    return Timing(tuple(samples.ms), BatchTimer.name, tuple(samples.others_cpu_ms)), held


def _alone(timed_reference, ring_of: Callable[[int], list], flush, hold: bool, context: Context) -> timing.Samples:
    """The reference's time per call on a ring of input sets (`ring_of(count)`), its outputs held or not (`hold`).
    With two input sets or more, each round's batch of more calls (ALONE_BATCH_MS) less the fastest batch of one call
    gives a call's time as their difference over the calls it adds, less the judge's copy of each further slot:
    whatever a batch costs once (the request, the reply, the first call's own handling) cancels, as it does, spread
    over many calls, in the timing loop's batches, and no calibration batch stands in for the model's own. With one
    set (inputs too large for two), batches of one call less the fixed cost of a batch."""
    ring = ring_of(2)
    if len(ring) < 2:
        return _batches_of_one(timed_reference, ring, flush, hold, context)
    single = reference_batches(timed_reference, 1, flush, context, hold)
    fastest_ms = min(timing.measure_side(single, timing.HostTimer())[1] for _ in range(SIZING_BATCHES))  # untimed
    many = len(ring_of(max(2, int(ALONE_BATCH_MS / max(fastest_ms, 1e-3)))))
    longer_side = reference_batches(timed_reference, many, flush, context, hold)
    one, longer = timing.sample_interleaved([single, longer_side], timing.HostTimer(), _alone_rule(context))
    if hold:
        timed_reference.keep()  # the judge's copies are calibrated on held outputs of calls that cost nothing
    slot_ms = copies_ms(timed_reference, many, context, hold)[1]
    once_ms = min(one.wall_ms)  # interference only adds: a slowed batch of one would take a round's call to nothing
    calls = [max((long_ms - once_ms) / (many - 1) - slot_ms, 0.0) for long_ms in longer.wall_ms]
    print(f"kbench: the reference alone: {len(calls)} rounds of batches of 1 and {many} calls, walls "  # the log
          f"{once_ms:.4g} (the fastest) and {statistics.median(longer.wall_ms):.4g} ms (the median), the judge's "
          f"copy of a slot {slot_ms:.4g} ms; a call {statistics.median(calls):.4g} ms, outputs "
          f"{'held' if hold else 'copied'}", flush=True)
    return timing.Samples(ms=calls, wall_ms=longer.wall_ms, others_cpu_ms=longer.others_cpu_ms)


def _batches_of_one(timed_reference, ring: list, flush, hold: bool, context: Context) -> timing.Samples:
    """Batches of one call, less the fixed cost of a batch (fixed_cost: the intercept of batches of calls that cost
    nothing), which holds whatever delays a batch once."""
    fixed_ms = fixed_cost(timed_reference, ring, timing.do_nothing, flush, context, hold)
    if len(ring) > 1:  # the judge's copy of the call's slot: the intercept leaves it out
        fixed_ms += copies_ms(timed_reference, len(ring), context, hold)[1]
    samples, = timing.sample_interleaved([reference_batches(timed_reference, 1, flush, context, hold)],
                                         timing.HostTimer(), _alone_rule(context))
    print(f"kbench: the reference alone: {len(samples.wall_ms)} batches of one call, median wall "  # the log
          f"{statistics.median(samples.wall_ms):.4g} ms (fastest {min(samples.wall_ms):.4g}), fixed cost "
          f"{fixed_ms:.4g} ms, outputs {'held' if hold else 'copied'}", flush=True)
    return rebased(samples, min(fixed_ms, min(samples.wall_ms)))  # as the timing loop bounds its own


def _alone_rule(context: Context) -> timing.StopRule:
    config = context.config  # one untimed round first: the ring's first batches (the runner names, the judge opens)
    return timing.StopRule(warmup=1, min_samples=3, max_samples=config.max_samples, target_rse=ALONE_TARGET_RSE,
                           budget_s=min(ALONE_BUDGET_S, config.time_budget_s))


@contextlib.contextmanager
def _taking_turns_on_one_cpu(context: Context):
    """The judge and both runners on one CPU while they are timed. They take turns (each runner computes or
    launches while the judge waits, the candidate's stopped while the reference runs), so nothing runs slower for
    it. On a CPU, a busy neighbour on one CPU, which slows a runner per second of its CPU time without taking its
    share of the CPU, slows both sides alike. On a GPU, a runner whose threads move between CPUs launches slower,
    and by more in one process than in another: pinned, both launch at one pace (docs/timing.md). Every thread of
    theirs, and whatever the candidate's runner started; no runner may change its own CPUs (runner/limits.py)."""
    with on_one_cpu([*context.runner.processes(), context.reference_runner.process.pid]) as cpu:
        print(f"kbench: timing on CPU {cpu}: the judge and both runners" if cpu is not None else
              "kbench: timing on the CPUs each process had (they could not be pinned to one)", flush=True)
        yield


def _flush(l2, device) -> Callable[[], None]:
    """Before each batch: L2 flushed, and the judge's own work (the flush, the round's input copies) done before the
    clock starts."""
    if l2 is None:
        return timing.do_nothing

    def flush():
        l2.flush()
        torch.cuda.synchronize(device)
    return flush


def _sample(sides: dict, rounds: FreshRounds, context: Context, warmup: int) -> tuple[dict, ClockRecord | None]:
    """Samples per side, and the GPU's clocks while they were taken. The models ran in the probe's batches already
    (timed_sides.plan_batches): `warmup` rounds for a ring larger than the probe's, whose new arenas have not. Each
    side runs `rounds.turns` batches in a row, each on contents of its own (fresh.py)."""
    config, device = context.config, context.device
    rule = timing.StopRule(warmup=warmup, min_samples=config.min_samples, max_samples=config.max_samples,
                           target_rse=config.target_rse, budget_s=config.time_budget_s)
    clock_log = timing.ClockLog(timing.nvml_clock_reader(device)) if device.type == "cuda" else None
    samples = timing.sample_interleaved(list(sides.values()), timing.HostTimer(), rule, clock_log=clock_log,
                                        before_round=rounds.new_round, turns=rounds.turns,
                                        before_turn=rounds.begin_turn)
    context.findings.raise_if_rejected()
    return dict(zip(sides, samples)), ClockRecord.from_readings(clock_log.readings) if clock_log else None


def _record(samples: dict, clocks: ClockRecord | None, context: Context) -> TimingRecord:
    throttled = guards.throttle_message(clocks)
    if throttled:
        context.findings.flag(flags.THROTTLED, throttled)
    reference_samples = samples.pop("reference")
    reference = Timing(tuple(reference_samples.ms), BatchTimer.name, tuple(reference_samples.others_cpu_ms))
    candidate = Timing(tuple(samples.pop("candidate").ms), BatchTimer.name)
    baselines = {name: Timing(tuple(side_samples.ms), BatchTimer.name) for name, side_samples in samples.items()}
    if "default" in context.config.baselines and default_is_reference(context):
        baselines["default"] = reference
    return TimingRecord(reference, candidate, tuple(baselines.items()), clocks)
