"""The problem's side of an evaluation: the reference built and run in the judge before the candidate exists (a
failure there is the problem's), the same Model built in the reference's runner meanwhile (the one timed beside the
candidate), its time alone before the candidate is imported, and the test a slowdown of it is put to."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import torch

from kbench import flags, stats, verdicts
from kbench.failures import Evidence, Kind, Party, Stop
from kbench.judge import guards
from kbench.judge.measure import TimingRecord, time_alone
from kbench.judge.progress import Context
from kbench.judge.quiet import QuietGpu
from kbench.judge.instances import begin_stand_in
from kbench.judge.output_room import OutputRoom
from kbench.judge.remote import RemoteModel
from kbench.loading import (build_reference, call_reference, clone, input_maker, reference_init_inputs,
                            release_cached_memory)
from kbench.op_recording import record_ops
from kbench.results import Timing
from kbench.schedule.job import Job


@dataclass
class Reference:
    """The reference at the evaluation's sizes, as it was before the candidate was imported."""

    model: object              # Model(*init_inputs), built right after the seed (the judge's: trials, truth, sweep)
    init_inputs: list
    make_inputs: object        # loading.input_maker at the evaluation's sizes
    ops: set[str]              # the aten ops its first call dispatched (empty without guards)
    mutates_inputs: bool       # its first call changed its inputs (else the trials call it on theirs, uncopied)
    room: OutputRoom           # what its outputs take: the most room the candidate's get
    stand_in: Callable[[], RemoteModel] | None = None  # waits for the same Model, begun in the reference's runner
    timed: RemoteModel | None = None  # that Model, built: the one timed (None: no timing)
    alone: Timing | None = None       # its timed calls before the candidate existed (None: not taken)
    alone_held: bool = False          # their outputs were read where its calls left them (measure.time_alone)


def reference_call_s(reference: Reference, context: Context) -> float:
    """One call of the reference, for the run limit (progress.derived_run_limit): its time alone where it was taken,
    else a call of the judge's Model on fresh inputs (its first call ran under op recording, and warmed it up)."""
    if reference.alone is not None:
        return reference.alone.median_ms / 1e3
    inputs = reference.make_inputs(context.config.seed + 100)
    started = time.perf_counter()
    call_reference(reference.model, inputs, context.device, cloned=True)
    return time.perf_counter() - started


def reference_first(job: Job, problem_module, context: Context) -> Reference:
    """Build and run the reference at the evaluation's sizes before the candidate exists: a reference that fails
    here is the problem's fault, whatever the candidate is. When candidates are timed, the same Model is being
    built in the reference's runner meanwhile. Nothing here is timed, so it runs while the last evaluation on the
    device may still be ending (LastEnding); should its judge still hold the room this needs, it runs again once
    that one has gone."""
    context.progress.enter("running the reference")
    try:
        return _reference_called(job, problem_module, context)
    except torch.OutOfMemoryError:
        if not context.last_ending.pending:
            raise
    context.last_ending.wait()
    release_cached_memory(context.device)
    context.progress.enter("running the reference")
    return _reference_called(job, problem_module, context)


def _reference_called(job: Job, problem_module, context: Context) -> Reference:
    config, device = context.config, context.device
    init_inputs = reference_init_inputs(problem_module, config.seed, device, config.precision)
    # The reference's runner builds its Model while the judge builds its own (a large one takes a second of CPU).
    stand_in = _begin_stand_in(job, init_inputs, context) if config.time else None
    make_inputs = input_maker(problem_module, device, config.precision)
    outputs: list = []
    try:
        model = build_reference(problem_module, init_inputs, config.seed, device, config.precision)
        inputs = make_inputs(config.seed)
        used = clone(inputs)  # nothing else is held yet: the one time a copy costs no room

        def first_call():  # a reference that fails here is the problem's fault
            outputs.append(call_reference(model, used, device, cloned=True))
        ops = record_ops(first_call) if config.guards else (first_call() or set())
    except torch.OutOfMemoryError:
        if stand_in is not None:  # its reply comes first: the reference's runner answers in order
            _drained(stand_in)
        raise
    room = OutputRoom.of(outputs[-1])
    guards.poison(outputs.pop())
    mutates = guards.inputs_mutated(inputs, used)
    return Reference(model, init_inputs, make_inputs, ops, mutates, room, stand_in)


def _drained(stand_in: Callable[[], RemoteModel]) -> None:
    try:
        stand_in()
    except Stop:
        pass  # whatever it says: the reference runs again (the stand-in begun anew), or the evaluation ends here


def reference_in_runner(job: Job, reference: Reference, context: Context) -> tuple[RemoteModel, Timing | None, bool]:
    """The problem's Model built in the reference's runner, the one the timing loop times beside the candidate
    under the same protocol; and (GPU, guards) its time alone, once the last evaluation on the device has ended and
    before the candidate is imported: what no candidate can have slowed."""
    config = context.config
    begun_before_the_last_ended = context.last_ending.pending
    context.last_ending.wait()  # nothing is timed before
    context.progress.enter("timing the reference alone")
    try:
        timed = reference.stand_in()
    except Stop as stop:  # the room it needed may have been the last judge's: once it is gone, again
        if not (begun_before_the_last_ended and "out of memory" in stop.message):
            raise
        release_cached_memory(context.device)
        timed = _begin_stand_in(job, reference.init_inputs, context)()
    if not (config.guards and context.device.type == "cuda"):
        return timed, None, False
    with context.progress.spent("guard: reference alone"):
        alone, held = time_alone(timed, reference.make_inputs, context)
        context.quiet_gpu = QuietGpu(context.device, context.runner.kill)
        context.quiet_gpu.calibrate()  # no candidate yet: what a probe takes on a GPU free of its work
    # Its arenas and copies of timed outputs are made again when the timing loop needs them; until then the trials
    # need the room (an 8 GiB output: both runners' arenas and the float64 truth do not fit an 80 GB card together).
    timed.release_arenas()
    return timed, alone, held


def _begin_stand_in(job: Job, init_inputs: list, context: Context) -> Callable[[], RemoteModel]:
    config = context.config
    return begin_stand_in(context.reference_runner, job.problem_path, config.policy, init_inputs, config.seed,
                          context.overrides, job.log_path, config.precision)


def check_slowed_reference(reference: Reference, timed: TimingRecord, context: Context) -> None:
    """The reference timed beside the candidate against its time alone. Slower beyond noise, the candidate is put
    to the test: its runner killed (and whatever it started), the reference is timed alone again. Back to its
    speed, the candidate slowed it (`slowed_reference`, which rejects); as slow still, the machine got busier,
    which no candidate is blamed for (a Stop of the machine's: infra_error). Where the timing loop copied the
    outputs into slots (a side could not hold them) and the time alone held them, the time alone is taken with
    a runner's copy of one call's outputs added (the judge's copy of them, timed): for a memory-bound call that
    copy alone doubles it."""
    alone = reference.alone
    if reference.alone_held and not timed.held:
        alone = dataclasses.replace(alone, samples_ms=tuple(ms + timed.slot_copy_ms for ms in alone.samples_ms))
    message = verdicts.slowed_reference_message(alone, timed.reference_timing)
    if message is None:
        return
    context.runner.kill()
    again, _ = time_alone(reference.timed, reference.make_inputs, context, whole_batches=True)
    if stats.slowdown(reference.alone.samples_ms, again.samples_ms) is not None:
        raise Stop(Evidence(Party.MACHINE, Kind.RAISED, (
            f"{message}, and {again.median_ms:.3g} ms again with the candidate's runner killed: the machine got "
            f"busier; re-run on a quiet one")))
    context.findings.flag(flags.SLOWED_REFERENCE, message)
    context.findings.raise_if_rejected()
