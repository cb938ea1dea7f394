"""The sides the timing loop runs, each timed in batches by the judge's own clock.

A batch is `count` calls of a model, call i on input set i of a ring of arenas the judge refilled with fresh
contents before it (fresh.py), its outputs copied into slot i of the ring's output arenas. The judge's clock runs
from the request until the judge holds its own copy of every slot (remote.RemoteModel.run_batch); the runner's
own clocks are never read. The per-call time is that wall time, less the judge's fixed cost per batch (measured
on the reference's runner, which runs no candidate code, as the intercept of batches of calls that cost nothing:
fixed_cost; and the judge's copy of each further slot, measured with the runners idle), divided by `count`.
`count` is chosen (plan_batches) so that the fixed cost, spread over the calls, is about 1% of a call or 1 us,
whichever is larger, as far as the ring's memory, the batch's length and the cost of fresh inputs allow. The
candidate (in its runner), the reference and PyTorch's-defaults baseline (in the reference's runner) and the
torch.compile baseline (in the judge) are batched alike, with the same `count` and the same contents."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace
from typing import Callable

import torch

from kbench import policy
from kbench.judge import guards, timing
from kbench.config import PYTORCH_DEFAULT
from kbench.loading import call_reference, clone, synchronize, tensor_bytes
from kbench.failures import one_line
from kbench.judge.progress import Context

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
# Input sets in the ring while the fixed cost is measured (batches of one call and of this many), and rounds of them.
CALIBRATION_CALLS = 8
FIXED_COST_ROUNDS = 7


def default_is_reference(context: Context) -> bool:
    """PyTorch's defaults differ from strict float32 only in cuDNN's TF32, on a GPU, under the strict policy."""
    return context.device.type != "cuda" or context.config.policy == PYTORCH_DEFAULT


class BatchTimer:
    """The judge's clock around one batch: (ms per call, the batch's wall ms, its outputs). Before the clock starts,
    the judge flushes L2 (and synchronises): inputs are cold for the batch's calls, each reading a set of its own;
    weights stay warm from call to call, on both sides alike. On a CPU it also reads the CPU time the side's runner
    used in its batches (`runner`), to tell when load hit one side and not the other (verdicts.uneven_load)."""

    name = "judge-clock"

    def __init__(self, flush: Callable[[], None], count: int = 1, fixed_ms: float = 0.0, runner=None, model=None):
        self.flush = flush
        self.count = count
        self.fixed_ms = fixed_ms
        self.runner = runner
        self.model = model         # the side's RemoteModel: its batches' walls split at the runner's reply (the log)
        self.reply_ms: list[float] = []
        self.cpu_s = 0.0
        self.wall_s = 0.0

    def measure(self, call) -> tuple[float, float, object]:
        self.flush()
        cpu_before = self.runner.cpu_seconds() if self.runner is not None else 0.0
        started = time.perf_counter()
        outputs = call()
        wall_ms = (time.perf_counter() - started) * 1e3
        if self.model is not None:
            self.reply_ms.append((self.model.replied_at - started) * 1e3)
        if self.runner is not None:
            self.cpu_s += self.runner.cpu_seconds() - cpu_before
            self.wall_s += wall_ms / 1e3
        return per_call_ms(wall_ms, self.fixed_ms, self.count), wall_ms, outputs


def per_call_ms(wall_ms: float, fixed_ms: float, count: int = 1) -> float:
    """A batch's time per call: its wall time less the fixed cost, over its calls (0 at least)."""
    return max(wall_ms - fixed_ms, 0.0) / count


def rebased(samples: timing.Samples, fixed_ms: float, count: int = 1) -> timing.Samples:
    """`samples` with their per-call times taken again from their batches' walls, at the fixed cost `fixed_ms`:
    where a calibration that a busy moment inflated is bounded by the fastest batch (a batch of real calls costs
    the fixed cost and more)."""
    return replace(samples, ms=[per_call_ms(wall, fixed_ms, count) for wall in samples.wall_ms])


@dataclass
class BatchPlan:
    """How the timing loop batches: the same for every side."""

    count: int                   # calls per batch
    overhead_ms: float           # what a batch costs beyond its calls and their slots (fixed_cost): requests, replies,
                                 # the first call's extra work, the judge's copy's launch
    copy_ms: float               # the judge's copy of each slot of the outputs, per call
    estimate_ms: float           # a call's time, first estimate (the faster of the two sides)
    limit: str = ""              # what held `count` below what the resolution asked for ("" when nothing did)
    slot_copy_ms: float = 0.0    # the judge's copy of one slot of every output, launch and all
    handling_ms: float = 0.0     # a batch of no calls in the reference's runner: a runner's handling of a request
    hold: bool = False           # outputs read where the calls left them (runner/held.py), not copied into slots
    candidate_ring: list | None = None   # each input set's buffers, in the candidate's runner's arenas
    reference_ring: list | None = None   # and in the reference's

    @property
    def fixed_ms(self) -> float:
        return self.overhead_ms + self.count * self.copy_ms

    @property
    def resolution_ms(self) -> float:
        """What the judge's clock cannot tell apart from a call: the part of its fixed cost per batch that a runner's
        own handling of a batch could shift, spread over the batch's calls. That is the fixed cost per batch less
        what of the judge's own copy it holds (no runner makes that cheaper: the copy of one slot less what each slot
        adds), and never less than a batch of no calls."""
        launch_ms = max(self.slot_copy_ms - self.copy_ms, 0.0)
        runner_ms = max(self.overhead_ms - launch_ms, min(self.handling_ms, self.overhead_ms))
        return runner_ms / self.count

    def describe(self) -> str:
        limited = f", held there by {self.limit}" if self.limit else ""
        outputs = "read where the calls left them" if self.hold else "copied into the ring's slots by the runner"
        return (f"batches of {self.count} call(s), outputs {outputs} (a call first estimated at "
                f"{self.estimate_ms:.3g} ms; the judge's fixed cost {self.overhead_ms:.3g} ms per batch and its copy "
                f"of the outputs {self.copy_ms:.3g} ms per call, subtracted; its own copy of one slot "
                f"{self.slot_copy_ms:.3g} ms; a batch of no calls {self.handling_ms:.3g} ms; resolution "
                f"{self.resolution_ms:.3g} ms per call{limited})")


def plan_batches(reference_model, timed_reference, candidate_model, rounds, flush, context: Context,
                 hold: bool = False) -> BatchPlan:
    """Measure the judge's fixed cost per batch (fixed_cost) and a first estimate of a call's time (batches of one
    call), size the batch, and load both runners' rings of that many input sets. `hold`: every batch's outputs are
    read where its calls left them (HoldUnusable from a batch where they cannot be)."""
    device = context.device
    output_bytes = _output_bytes(reference_model, rounds.sets[0], device)
    room = ring_room(rounds.sets[0], output_bytes, device)
    plan = BatchPlan(1, 0.0, 0.0, 0.0, hold=hold)
    _load_rings(plan, min(CALIBRATION_CALLS, room), rounds, timed_reference, candidate_model, output_bytes)
    plan.overhead_ms = fixed_cost(timed_reference, plan.reference_ring, lambda: rounds.load(plan.reference_ring), flush,
                                  context, hold)
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
    rounds.count = plan.count  # the timing loop's rounds make that many sets
    plan.slot_copy_ms, plan.copy_ms = copies_ms(timed_reference, len(plan.reference_ring), context, hold)
    plan.handling_ms = empty_ms(timed_reference, context)
    print(f"kbench: judge's clock: {plan.describe()}", flush=True)  # the evaluation's log
    return plan


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
    if hold or len(ring) > 1:
        timed_reference.keep()
    if len(ring) < 2:
        return empty_ms(timed_reference, context) + copies_ms(timed_reference, 1, context, hold)[0]
    sizes = (1, len(ring))
    sides = [runner_side(lambda count=count: timed_reference.run_batch(count, kept=True, hold=hold), refill, context,
                         timing.do_nothing, BatchTimer(flush, count), timed_reference) for count in sizes]
    rule = timing.StopRule(warmup=1, min_samples=FIXED_COST_ROUNDS, max_samples=FIXED_COST_ROUNDS,
                           target_rse=math.inf, budget_s=math.inf)
    one, many = (min(samples.wall_ms) for samples in timing.sample_interleaved(sides, timing.HostTimer(), rule))
    # No more than a batch of one took: on a busy machine the two can come out in the wrong order, and a fixed cost
    # above a batch's wall would leave a call no time at all.
    return min(max(one - (many - one) / (sizes[1] - 1), 0.0), one)


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
    context.runner.pause()
    try:
        if context.quiet_gpu is not None:
            context.quiet_gpu.wait(context.findings)
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


def build_sides(timed_reference, candidate_model, rounds, flush, plan: BatchPlan, context: Context,
                compiled=None, baselines: bool = True) -> dict[str, timing.Side]:
    """'candidate', 'reference' and the baselines asked for, in the order the timing loop runs them (the candidate
    first: fresh.py), each a batch of `plan.count` calls on the round's contents, loaded into its ring before it.
    While anything but the candidate runs, the candidate's runner is stopped (remote_process.RunnerProcess.pause),
    and the reference's while the candidate runs; before every clock starts, on a GPU, the judge waits until the GPU
    is free of the work queued before (quiet.py): every side's batch starts from the same state. `compiled`: the
    torch.compile baseline, timed in the judge on the reference's ring."""
    config, count, hold = context.config, plan.count, plan.hold
    on_cpu = context.device.type == "cpu"

    def timer(runner=None, model=None, fixed_ms=plan.fixed_ms) -> BatchTimer:
        return BatchTimer(flush, count, fixed_ms, runner if on_cpu else None, model)
    def prepare_candidate():
        rounds.load(plan.candidate_ring)
        _quiet(context, context.reference_runner)
        candidate_model.run_batch(0)  # its runner, stopped until now, is awake and reading when the clock starts

    def candidate_done(outputs):
        if context.reference_runner is not None:
            context.reference_runner.resume()
        rounds.candidate_done(outputs)
    candidate_side = timing.Side(lambda: candidate_model.run_batch(count, hold=hold), prepare=prepare_candidate,
                                 inspect=candidate_done, timer=timer(context.runner, candidate_model))
    reference_inspect = rounds.reference_done if config.guards else timing.do_nothing

    def refill_reference():
        rounds.load(plan.reference_ring)
    sides = {"candidate": candidate_side,
             "reference": runner_side(lambda: timed_reference.run_batch(count, hold=hold), refill_reference, context,
                                      reference_inspect, timer(context.reference_runner, timed_reference),
                                      timed_reference)}
    baseline_inspect = _poison_batch if config.guards else timing.do_nothing
    if baselines and "default" in config.baselines and not default_is_reference(context):
        sides["default"] = runner_side(lambda: timed_reference.run_batch(count, precision=PYTORCH_DEFAULT, hold=hold),
                                       refill_reference, context, baseline_inspect, timer(model=timed_reference),
                                       timed_reference)
    if compiled is not None:
        ring = plan.reference_ring
        sides["compile"] = runner_side(lambda: _local_batch(compiled, ring[:count], context.device, copy=not hold),
                                       refill_reference, context, timing.do_nothing, timer(fixed_ms=0.0))
    return sides


def _quiet(context: Context, other) -> None:
    """Before any side's clock starts, the same steps: the runner not timed (`other`) stopped, then, on a GPU, the
    GPU free of the work queued before (quiet.py)."""
    if other is not None:
        other.pause()
    if context.quiet_gpu is not None:
        context.quiet_gpu.wait(context.findings)


def runner_side(call, refill: Callable[[], None], context: Context, inspect, timer, model=None) -> timing.Side:
    """A side timed in a runner other than the candidate's (or in the judge): its ring refilled, the candidate's
    runner stopped and, on a GPU, the GPU free of the candidate's queued work before the clock starts; `model`'s
    runner awake and reading when it does."""
    def prepare():
        refill()
        _quiet(context, context.runner)
        if model is not None:
            model.run_batch(0)  # as the candidate's: its runner has just answered when the clock starts

    def after(outputs):
        context.runner.resume()
        inspect(outputs)
        policy.apply_policy(context.config.policy)  # whatever a baseline changed, the checking policy is back
    return timing.Side(call, prepare=prepare, inspect=after, timer=timer)


def _poison_batch(outputs) -> None:
    for ring in outputs.rings:
        guards.poison(ring)


def _local_batch(model, ring: list, device: torch.device, copy: bool) -> None:
    """A batch in the judge (the torch.compile baseline): each call's outputs are kept until the batch ends, or
    copied as a runner copies them into its slots (`copy`)."""
    kept = []
    for inputs in ring:
        output = model(*inputs)
        values = output if isinstance(output, (tuple, list)) else [output]
        kept += [torch.empty_like(value).copy_(value) if copy else value
                 for value in values if isinstance(value, torch.Tensor)]
    synchronize(device)


def compiled_reference(reference_model, inputs, context: Context):
    """torch.compile of the reference, compiled here (untimed); None when it does not compile."""
    try:
        compiled = torch.compile(reference_model)
        compiled(*clone(inputs))
        return compiled
    except Exception as error:  # the baseline is missing, which is not the candidate's fault
        print(f"kbench: torch.compile baseline unavailable: {one_line(error)}", flush=True)
        context.findings.note(f"compile baseline unavailable ({one_line(error)})")
        return None
