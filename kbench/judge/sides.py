"""The sides the timing loop runs, each a batch of calls behind the judge's own clock (BatchTimer).

The judge's clock runs from the request until the judge holds its own copy of every call's outputs
(remote.RemoteModel.run_batch); the runner's own clocks are never read. The candidate (in its runner), the
reference and PyTorch's-defaults baseline (in the reference's runner) and the torch.compile baseline (in the judge)
are timed alike, each batch started from the same state: the runner not timed stopped, the GPU quiet."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import torch

from kbench import policy
from kbench.config import PYTORCH_DEFAULT
from kbench.failures import one_line
from kbench.judge import guards, timing
from kbench.judge.progress import Context
from kbench.judge.copies import BatchOutputs
from kbench.loading import clone, synchronize


def default_is_reference(context: Context) -> bool:
    """PyTorch's defaults differ from strict float32 only in cuDNN's TF32, on a GPU, under the strict policy."""
    return context.device.type != "cuda" or context.config.policy == PYTORCH_DEFAULT


class BatchTimer:
    """The judge's clock around one batch: (ms per call, the batch's wall ms, its outputs). Before the clock starts,
    the judge flushes L2 (and synchronises): inputs are cold for the batch's calls, each reading a set of its own;
    weights stay warm from call to call, on both sides alike. On a CPU it also reads the CPU time the side's runner
    used in its batches (`runner`), to tell when load hit one side and not the other (verdicts.uneven_load)."""

    name = "judge-clock"

    def __init__(self, flush: Callable[[], None], count: int = 1, fixed_ms: float = 0.0, runner=None):
        self.flush = flush
        self.count = count
        self.fixed_ms = fixed_ms
        self.runner = runner
        self.reply_ms: list[float] = []  # per batch in a runner, from its request to the reply (the log)
        self.cpu_s = 0.0
        self.wall_s = 0.0

    def measure(self, call) -> tuple[float, float, object]:
        self.flush()
        cpu_before = self.runner.cpu_seconds() if self.runner is not None else 0.0
        started = time.perf_counter()
        outputs = call()
        wall_ms = (time.perf_counter() - started) * 1e3
        if isinstance(outputs, BatchOutputs):
            self.reply_ms.append((outputs.replied_at - started) * 1e3)
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
    turns: int = 1               # batches each side runs in a row in a round, each on contents of its own
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
        turns = "two in a row for each side" if self.turns == 2 else "one for each side in a round"
        return (f"batches of {self.count} call(s), outputs {outputs}, {turns} (a call first estimated at "
                f"{self.estimate_ms:.3g} ms; the judge's fixed cost {self.overhead_ms:.3g} ms per batch and its copy "
                f"of the outputs {self.copy_ms:.3g} ms per call, subtracted; its own copy of one slot "
                f"{self.slot_copy_ms:.3g} ms; a batch of no calls {self.handling_ms:.3g} ms; resolution "
                f"{self.resolution_ms:.3g} ms per call{limited})")


def build_sides(timed_reference, candidate_model, rounds, flush, plan: BatchPlan, context: Context,
                compiled=None, baselines: bool = True) -> dict[str, timing.Side]:
    """'candidate', 'reference' and the baselines asked for, in the order the timing loop runs them (the candidate
    first: fresh.py), each a batch of `plan.count` calls on the current turn's contents, loaded into its ring
    before it. While anything but the candidate runs, the candidate's runner is stopped
    (remote_process.RunnerProcess.pause), and the reference's while the candidate runs; before every clock starts,
    on a GPU, the judge waits until the GPU is free of the work queued before (quiet.py): every side's batch starts
    from the same state. `compiled`: the torch.compile baseline, timed in the judge on the reference's ring."""
    config, count, hold = context.config, plan.count, plan.hold
    on_cpu = context.device.type == "cpu"

    def timer(runner=None, fixed_ms=plan.fixed_ms) -> BatchTimer:
        return BatchTimer(flush, count, fixed_ms, runner if on_cpu else None)

    def refill_candidate():
        rounds.load(plan.candidate_ring)

    def refill_reference():
        rounds.load(plan.reference_ring)
    # Its outputs on a turn's contents wait in a buffer of that turn's for the reference's (fresh.py).
    candidate_side = runner_side(lambda: candidate_model.run_batch(count, hold=hold, into=rounds.turn),
                                 refill_candidate, context, rounds.candidate_done, timer(context.runner),
                                 candidate_model, stopped=context.reference_runner)
    reference_inspect = rounds.reference_done if config.guards else timing.do_nothing
    sides = {"candidate": candidate_side,
             "reference": runner_side(lambda: timed_reference.run_batch(count, hold=hold), refill_reference, context,
                                      reference_inspect, timer(context.reference_runner), timed_reference,
                                      stopped=context.runner)}
    baseline_inspect = _poison_batch if config.guards else timing.do_nothing
    if baselines and "default" in config.baselines and not default_is_reference(context):
        sides["default"] = runner_side(lambda: timed_reference.run_batch(count, precision=PYTORCH_DEFAULT, hold=hold),
                                       refill_reference, context, baseline_inspect, timer(), timed_reference,
                                       stopped=context.runner)
    if compiled is not None:
        ring = plan.reference_ring
        sides["compile"] = runner_side(lambda: _local_batch(compiled, ring[:count], context.device, copy=not hold),
                                       refill_reference, context, timing.do_nothing, timer(fixed_ms=0.0),
                                       stopped=context.runner)
    return sides


def quiet_start(context: Context, other) -> None:
    """Before any side's clock starts (and the judge's calibration of its own copies), the same steps: the runner
    not timed (`other`) stopped, then, on a GPU, the GPU free of the work queued before (quiet.py)."""
    if other is not None:
        other.pause()
    if context.quiet_gpu is not None:
        context.quiet_gpu.wait(context.findings)


def runner_side(call, refill: Callable[[], None], context: Context, inspect, timer, model=None, *,
                stopped) -> timing.Side:
    """A side timed in a runner (or in the judge): before the clock starts, the runner not timed (`stopped`: the
    reference's for the candidate, the candidate's for the others) stopped and, on a GPU, the GPU free of the work
    queued before (quiet_start); `model`'s runner woken (it answers a batch of no calls, stopped until then or
    not); then its ring refilled, last: a kernel or a thread of the runner's own waiting for new contents would
    otherwise work on them while the judge waits for the GPU or the runner's answer, off the clock (docs/timing.md
    says what is left of that window on a GPU). The stopped runner is resumed after."""
    def prepare():
        quiet_start(context, stopped)
        if model is not None:
            model.run_batch(0)
        refill()

    def after(outputs):
        if stopped is not None:
            stopped.resume()
        inspect(outputs)
        policy.apply_policy(context.config.policy)  # whatever a baseline changed, the checking policy is back
    return timing.Side(call, prepare=prepare, inspect=after, timer=timer)


def _poison_batch(outputs) -> None:
    guards.poison(outputs.rings)


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
