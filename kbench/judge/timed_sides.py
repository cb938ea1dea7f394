"""How the timing loop batches, and the judge's calibration of its own cost per batch.

A batch is `count` calls of a model, call i on input set i of a ring of arenas the judge refilled with fresh
contents before it (fresh.py), timed by the judge's own clock (sides.py). The per-call time is its wall time, less
the judge's fixed cost per batch (measured on the reference's runner, which runs no candidate code, as the
intercept of batches of calls that cost nothing: fixed_cost; and the judge's copy of each further slot, measured
with the runners idle), divided by `count`. `count` is chosen (plan_batches) so that the fixed cost, spread over
the calls, is about 1% of a call or 1 us, whichever is larger, as far as the ring's memory, the batch's length and
the cost of fresh inputs allow. Every side is batched alike, with the same `count` and the same contents."""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from kbench.judge import guards, timing
from kbench.loading import call_reference, synchronize, tensor_bytes
from kbench.judge.progress import Context
from kbench.judge.sides import BatchPlan, BatchTimer, build_sides, quiet_start, rebased, runner_side

# The judge's fixed cost per batch, spread over the batch's calls, is at most this share of a call...
RESOLUTION_SHARE = 0.01
# ...or this many milliseconds, whichever is larger (a per-call floor: short calls need no more calls than this).
RESOLUTION_FLOOR_MS = 0.001
# A batch lasts at most this long (and at most a fortieth of the time budget): enough batches to take a median;
# and holds at most this many calls (each round draws an input set per call).
MAX_BATCH_MS = 20.0
MAX_BATCH_CALLS = 1000
# A round makes its batch's input sets in about this long at most (fresh.py): it holds `count` down where the problem's
# get_inputs is slow beside a call.
MAX_ROUND_INPUTS_MS = 20.0
# The rings (inputs and outputs, both runners, the judge's copies) take at most this share of the device's free
# memory, or of the host's available memory on a CPU (and at most RING_HOST_BYTES there).
RING_MEMORY_SHARE = 0.3
RING_HOST_BYTES = 1 << 30
# Empty batches (the fixed cost where the ring holds one input set), rounds of single calls that estimate a call's
# time, copies that time the judge's copy of the slots.
EMPTY_BATCHES = 7
PROBE_ROUNDS = 2
COPY_CALIBRATIONS = 5
# Batches each side runs in a row in a round, each on contents of its own (timing.sample_interleaved): every side
# then follows another side once and itself once, whatever its place in the round (where memory allows: _turns_fit).
TURNS = 2
# Input sets in the ring while the fixed cost is measured (batches of one call and of this many), and rounds of them.
CALIBRATION_CALLS = 8
FIXED_COST_ROUNDS = 7


def plan_batches(reference_model, timed_reference, candidate_model, rounds, flush, context: Context,
                 hold: bool = False) -> BatchPlan:
    """Measure the judge's fixed cost per batch (fixed_cost) and a first estimate of a call's time (batches of one
    call), size the batch, and load both runners' rings of that many input sets. `hold`: every batch's outputs are
    read where its calls left them (HoldUnusable from a batch where they cannot be)."""
    device = context.device
    rounds.turns = 1  # the probe's rounds (and a second plan's, with outputs copied, starts like the first)
    rounds.begin_turn(0)  # a batch that could not be held may have stopped the last round in its second turn
    output_bytes = _output_bytes(reference_model, rounds.sets[0], device)
    room = ring_room(rounds.sets[0], output_bytes, device)
    plan = BatchPlan(1, 0.0, 0.0, 0.0, hold=hold)
    _load_rings(plan, min(CALIBRATION_CALLS, room), rounds, timed_reference, candidate_model, output_bytes)
    if len(plan.reference_ring) < 2:  # batches of one call: the parts of their fixed cost are what the plan needs
        plan.handling_ms, plan.slot_copy_ms = _one_set_cost(timed_reference, context, hold)
        plan.overhead_ms = plan.handling_ms + plan.slot_copy_ms
    else:
        plan.overhead_ms = fixed_cost(timed_reference, plan.reference_ring, lambda: rounds.load(plan.reference_ring),
                                      flush, context, hold)
    rounds.count = 1  # the probe's batches: one call, one input set a round
    probe = build_sides(timed_reference, candidate_model, rounds, flush, plan, context, baselines=False)
    rule = timing.StopRule(warmup=max(context.config.warmup, 1), min_samples=PROBE_ROUNDS, max_samples=PROBE_ROUNDS,
                           target_rse=math.inf, budget_s=math.inf)
    samples = timing.sample_interleaved([probe["candidate"], probe["reference"]], timing.HostTimer(), rule,
                                        before_round=rounds.new_round)
    # A batch of one real call costs the fixed cost and more: where a busy machine inflated the calibration, the
    # probe's fastest batch bounds it (and the first estimate follows).
    fastest = min(min(side.wall_ms) for side in samples)
    if fastest < plan.overhead_ms:
        plan.overhead_ms = fastest
        samples = [rebased(side, fastest) for side in samples]
    plan.estimate_ms = max(min(statistics.median(side.ms) for side in samples), 1e-6)
    wanted = math.ceil(plan.overhead_ms / max(RESOLUTION_SHARE * plan.estimate_ms, RESOLUTION_FLOOR_MS))
    longest = max(1, min(MAX_BATCH_CALLS,
                         int(min(MAX_BATCH_MS, context.config.time_budget_s * 1e3 / 40) / plan.estimate_ms)))
    affordable = _affordable(rounds)
    plan.count = max(1, min(wanted, longest, room, affordable))
    if plan.count < wanted:
        plan.limit = min((room, "the ring's memory"), (longest, "the batch's length"),
                         (affordable, "making its fresh inputs"))[1]
    if plan.count > len(plan.reference_ring):
        _load_rings(plan, plan.count, rounds, timed_reference, candidate_model, output_bytes)
    rounds.count = plan.count  # the timing loop's rounds make that many sets, for each turn
    plan.turns = rounds.turns = TURNS if _turns_fit(rounds.sets[0], output_bytes, plan.count, device) else 1
    for into in range(plan.turns):  # made now, not inside a timed batch
        candidate_model.reserve_copies(plan.count, into)
    if len(plan.reference_ring) > 1:
        plan.slot_copy_ms, plan.copy_ms = copies_ms(timed_reference, len(plan.reference_ring), context, hold)
        plan.handling_ms = empty_ms(timed_reference, context)
    print(f"kbench: judge's clock: {plan.describe()}", flush=True)  # the evaluation's log
    return plan


def _turns_fit(inputs: list, output_bytes: list[int], count: int, device: torch.device) -> bool:
    """Whether the memory a second turn takes (its input sets, and a second buffer of the judge's for the candidate's
    outputs, which wait for the reference's) fits in RING_MEMORY_SHARE of what is free now, beside the rings."""
    extra = count * (tensor_bytes(inputs) + sum(output_bytes))
    return extra <= RING_MEMORY_SHARE * _free_bytes(device)


def _affordable(rounds) -> int:
    """Input sets a round can make (each call of a batch has a set of its own, made anew every round) in about
    MAX_ROUND_INPUTS_MS, at the pace of the fastest round so far (not of all of them: a first round that is slow
    by itself would hold every batch short); unbounded where rounds reuse their contents."""
    if not rounds.fresh or not rounds.sets_made:
        return MAX_BATCH_CALLS
    return max(1, int(MAX_ROUND_INPUTS_MS / max(rounds.set_s * 1e3, 1e-6)))


def _load_rings(plan: BatchPlan, count: int, rounds, timed_reference, candidate_model, output_bytes) -> None:
    """Rings of `count` input sets (and output slots) in both runners, with a round of contents of that many."""
    rounds.count = count
    rounds.new_round()
    plan.candidate_ring = candidate_model.load_ring(rounds.sets, output_bytes)
    plan.reference_ring = timed_reference.load_ring(rounds.sets, output_bytes)


def _output_bytes(reference_model, inputs: list, device: torch.device) -> list[int]:
    """Bytes of each of the reference's outputs (the sizes of the ring's output slots), from the judge's own
    reference on a copy of `inputs`."""
    output = call_reference(reference_model, inputs, device)
    sizes = output_sizes(output)
    guards.poison(output)
    return sizes


def output_sizes(output) -> list[int]:
    return [tensor_bytes(value) for value in (output if isinstance(output, (tuple, list)) else [output])]


def ring_room(inputs: list, output_bytes: list[int], device: torch.device) -> int:
    """Input sets (with their output slots, both runners' and the judge's copies, and the outputs both runners hold)
    that RING_MEMORY_SHARE of the free memory holds; 1 at least."""
    per_set = 3 * tensor_bytes(inputs) + 7 * sum(output_bytes)
    return max(1, int(_free_bytes(device) * RING_MEMORY_SHARE / max(per_set, 1)))


def fixed_cost(timed_reference, ring: list, refill: Callable[[], None], flush, context: Context,
               hold: bool = False) -> float:
    """What a batch costs beyond its calls, in ms: the intercept of the fastest wall times (load only ever adds to a
    batch's time, and an inflated fixed cost reads the calls faster than they are) of batches of one call and of as
    many as the ring holds (CALIBRATION_CALLS at most) in the reference's runner, each timed as the timing loop
    times it (its ring refilled, the candidate's runner stopped, L2 flushed), whose calls return the reference's
    outputs kept from real calls on the ring's first input sets (RemoteModel.keep) and so cost nothing but their copies:
    no model's own first-call work counts as the fixed cost, which a faster candidate would then be timed below. It
    holds all a batch does once, wherever it happens: the request and the reply, the synchronisations, the first
    call's handling, the judge's copy's launch; not the copy of each slot (copies_ms, per call: it is in the
    batches' slope). `refill`: before each batch, what the timing loop does to the ring. `hold`: the outputs read
    where the calls left them, as the timing loop's batches read them. Where the ring holds one input set (inputs
    too large for two; batches of one call), a batch of no calls and the judge's copy of one slot stand in for it."""
    if len(ring) < 2:
        return sum(_one_set_cost(timed_reference, context, hold))
    timed_reference.keep()
    sizes = (1, len(ring))
    sides = [reference_batches(timed_reference, count, flush, context, hold, kept=True, refill=refill)
             for count in sizes]
    rule = timing.StopRule(warmup=1, min_samples=FIXED_COST_ROUNDS, max_samples=FIXED_COST_ROUNDS,
                           target_rse=math.inf, budget_s=math.inf)
    one, many = (min(samples.wall_ms) for samples in timing.sample_interleaved(sides, timing.HostTimer(), rule))
    # No more than a batch of one took: on a busy machine the two can come out in the wrong order, and a fixed cost
    # above a batch's wall would leave a call no time at all.
    return min(max(one - (many - one) / (sizes[1] - 1), 0.0), one)


def reference_batches(timed_reference, count: int, flush, context: Context, hold: bool, kept: bool = False,
                      refill: Callable[[], None] = timing.do_nothing) -> timing.Side:
    """Batches of `count` calls in the reference's runner, timed as the timing loop times them (the candidate's
    runner stopped, the GPU quiet, L2 flushed), whose outputs no one checks: the judge's calibrations and the
    reference's time alone. `kept`: calls that return the kept outputs, at no cost."""
    return runner_side(lambda: timed_reference.run_batch(count, kept=kept, hold=hold), refill, context,
                       timing.do_nothing, BatchTimer(flush, count), timed_reference, stopped=context.runner)


def _one_set_cost(timed_reference, context: Context, hold: bool) -> tuple[float, float]:
    """Where the ring holds one input set: (a batch of no calls, the judge's copy of one slot), which stand in for
    the fixed cost's intercept together."""
    if hold:
        timed_reference.keep()
    return empty_ms(timed_reference, context), copies_ms(timed_reference, 1, context, hold)[0]


def empty_ms(timed_reference, context: Context) -> float:
    """The median wall time of batches of no calls in the reference's runner."""
    walls = []
    for _ in range(EMPTY_BATCHES):
        synchronize(context.device)
        started = time.perf_counter()
        timed_reference.run_batch(0)
        walls.append((time.perf_counter() - started) * 1e3)
    return statistics.median(walls)


def copies_ms(timed_reference, slots: int, context: Context, hold: bool = False) -> tuple[float, float]:
    """The judge's own copies of the outputs, timed with the candidate's runner stopped: (its copy of one slot of
    every output, what each slot adds: the slope of copies of one slot and of `slots`; 0 with `slots` 1).
    `hold`: copies of outputs held in the reference's runner, as the timing loop's batches make them."""
    try:
        quiet_start(context, context.runner)
        one = min(timed_reference.copy_ms(1, hold) for _ in range(COPY_CALIBRATIONS))  # load only adds: the fastest
        if slots < 2:
            return one, 0.0
        many = min(timed_reference.copy_ms(slots, hold) for _ in range(COPY_CALIBRATIONS))
        return one, max(many - one, 0.0) / (slots - 1)
    finally:
        context.runner.resume()


def _free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    try:
        with open("/proc/meminfo") as meminfo:
            available = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        available = RING_HOST_BYTES
    return min(available, int(RING_HOST_BYTES / RING_MEMORY_SHARE))
