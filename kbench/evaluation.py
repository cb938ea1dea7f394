"""One evaluation, stage by stage: load the problem, import the solution (building its extensions), build
both models, run the correctness trials, time, sweep; every failure on the way is a Stop that becomes the
outcome's status."""

from __future__ import annotations

import resource
import traceback
from dataclasses import dataclass, replace

import torch

from kbench import flags, guards, params
from kbench.job import Job, final_outcome, one_line
from kbench.loading import build_candidate, build_reference, call_reference, input_maker, load_problem, load_solution
from kbench.measure import measure, slowed_reference_message, time_alone
from kbench.param_sweep import run_sweep
from kbench.problem import overridden
from kbench.progress import Context, Findings, Progress, Stop
from kbench.results import Outcome, Status, SweepResult, Timing
from kbench.reference_guard import ReferenceSnapshot
from kbench.trials import note_library_only, note_reference_ops, run_trials

# Errors that, on a CPU-only run, mean the candidate needs CUDA rather than that it is wrong.
_NO_CUDA_MESSAGES = ("not compiled with CUDA", "no NVIDIA driver", "CUDA_HOME", "No CUDA GPUs",
                     "Found no NVIDIA", "CUDA driver", "cuda runtime")


_BEFORE_THE_CANDIDATE = ("starting", "loading problem", "running the reference")


def judge(job: Job, device: torch.device, progress: Progress, environment: dict) -> Outcome:
    """The outcome of `job`; `environment` (device name, versions) goes into it as it is."""
    context = Context(job.config, device, progress, Findings(progress))

    def finish(outcome: Outcome) -> Outcome:
        return replace(outcome, sizes=context.sizes, build_s=progress.build_seconds(),
                       build_reused=progress.build.all_reused, cpu_s=_cpu_seconds(), phase_s=progress.phases(),
                       **environment)
    try:
        return finish(_stages(job, context, finish))
    except Stop as stop:
        status, message = _needs_cuda(stop, device)
        return finish(context.findings.outcome(status, message=_with_hint(status, message, job, context),
                                               check=context.check))
    except Exception as error:  # raised outside a Stop: a lost CUDA context (loading.lost_context), say
        traceback.print_exc()
        return finish(_unexpected(error, context))


def _unexpected(error: Exception, context: Context) -> Outcome:
    """An error that surfaced outside the stages' own checks belongs to the candidate once its code has run in
    this process (its kernels are asynchronous: the error surfaces in whatever CUDA call comes next). After
    the official verdict it ends the sweep at the configuration being run; before it, it is a runtime error."""
    record, what = context.progress.record, one_line(error)
    if context.official is not None:
        sweep = SweepResult(passed=record.sweep.passed, run=record.sweep.run + 1, skipped=record.sweep.skipped,
                            first_failure=f"{record.current or 'after the sweep'}: {what}")
        return final_outcome(context.official, sweep, context.config.strict)
    # Before the candidate was imported, nothing of it ran: the problem failed.
    status = Status.REFERENCE_ERROR if record.phase in _BEFORE_THE_CANDIDATE else Status.RUNTIME_ERROR
    return context.findings.outcome(status, message=f"failed while {record.phase}: {what}", check=context.check)


def _with_hint(status: str, message: str, job: Job, context: Context) -> str:
    """A reference that fails at kbench's reduced CPU sizes may run at the official ones."""
    if status == Status.REFERENCE_ERROR and context.sizes and not job.overrides:
        return f"{message} (at kbench's reduced CPU sizes {context.sizes}; try --full-size)"
    return message


def _stages(job: Job, context: Context, finish) -> Outcome:
    config, progress = context.config, context.progress
    progress.enter("loading problem")
    problem_module = load_problem(job.problem_path)
    overrides = dict(job.overrides)
    if context.device.type == "cpu" and not config.full_size and not overrides:
        overrides = params.small_overrides(problem_module)
    context.overrides = overrides
    # Taken before the candidate is imported: what settings and harness functions must stay as they are.
    context.watch = guards.Watch(harness=not job.build_only)
    if job.build_only:
        _import_solution(job, context)
        return context.findings.outcome(Status.BUILT)
    with torch.no_grad():
        with overridden(problem_module, overrides):
            reference = _reference_first(problem_module, context)
            solution_module = _import_solution(job, context)
            official = context.official = _official_verdict(solution_module, reference, context)
        progress.update(provisional=finish(official))  # survives a sweep that kills the worker
        sweep = None
        if config.sweep > 0:
            sweep = run_sweep(problem_module, solution_module, context)  # drawn around the official sizes
            with overridden(problem_module, overrides):  # the reference's snapshot was taken under them
                context.checkpoint("sweeping ModelNew")
    return final_outcome(official, sweep, config.strict)


@dataclass
class _Reference:
    """The reference as it was before the candidate was imported."""

    model: object              # Model(*init_inputs), built right after the seed
    init_inputs: list
    make_inputs: object        # loading.input_maker at the evaluation's sizes
    alone: Timing | None       # its timed calls before the candidate existed (None: not timed)
    ops: set[str]              # the aten ops its first call dispatched (guards.record_ops; empty without guards)


def _reference_first(problem_module, context: Context) -> _Reference:
    """Build and run the reference at the evaluation's sizes before the candidate exists: a reference that fails
    here is the problem's fault, whatever the candidate is, and its time here is one no candidate touched."""
    config, device = context.config, context.device
    context.progress.enter("running the reference")
    model, init_inputs = build_reference(problem_module, config.seed, device)
    make_inputs = input_maker(problem_module, device)

    ops: set[str] = set()

    def first_call():  # a reference that fails here is the problem's fault
        guards.poison(call_reference(model, make_inputs(config.seed), device))

    def first_call_recorded():  # the ops it runs, for the candidate's calls_reference_op
        ops.update(guards.record_ops(first_call))
    if config.guards:  # what defines the reference, to tell whether the candidate changes it
        with context.progress.spent("guard: reference snapshot"):
            context.watch.reference = ReferenceSnapshot.take(problem_module, model, probe=first_call_recorded)
    else:
        first_call()
    # On a GPU only: a CPU's host clock, shared with whatever else the machine runs (torch's own threads
    # among them), moves the reference's time by far more than any threshold could tell from a cheat.
    timed_alone = config.time and config.guards and device.type == "cuda"
    with context.progress.spent("guard: reference alone"):
        alone = time_alone(model, make_inputs, context) if timed_alone else None
    return _Reference(model, init_inputs, make_inputs, alone, ops)


def _note_slowed_reference(alone: Timing, during: Timing, context: Context) -> None:
    """Rejecting flag when the reference ran slower beside the candidate than alone before it was imported, or
    other threads worked while it ran (a thread of the candidate's, or a change the snapshot cannot see)."""
    message = slowed_reference_message(alone, during)
    if message:
        context.findings.flag(flags.SLOWED_REFERENCE, message)
        context.findings.raise_if_rejected()


def _import_solution(job: Job, context: Context):
    context.progress.enter("loading solution")
    solution_module = load_solution(job.solution_path)
    context.checkpoint("importing the solution")
    return solution_module


def _official_verdict(solution_module, reference: _Reference, context: Context) -> Outcome:
    """Correct (with its timing and flags) at the official sizes (or the CPU's reduced ones), or a Stop."""
    config, device, progress = context.config, context.device, context.progress
    progress.enter("building ModelNew")
    candidate_model = build_candidate(solution_module, reference.init_inputs, config.seed, device)
    context.checkpoint("constructing ModelNew")
    progress.enter("checking")
    trials = run_trials(reference.model, candidate_model, reference.make_inputs, context)
    if config.guards:
        with progress.spent("guard: reference ops"):
            note_reference_ops(reference.ops, candidate_model, reference.make_inputs(config.seed), context)
    timed = measure(reference.model, candidate_model, reference.make_inputs, trials, context) \
        if config.time else None
    context.checkpoint("timing ModelNew")
    if timed and reference.alone:
        _note_slowed_reference(reference.alone, timed.reference_timing, context)
    if config.guards and device.type == "cuda":
        with progress.spent("guard: kernel attribution"):
            note_library_only(candidate_model, reference.make_inputs(config.seed), context)
    return context.findings.outcome(Status.CORRECT, check=trials.check, message=context.findings.message,
                                    reference_alone=reference.alone, **(timed.fields() if timed else {}))


def _needs_cuda(stop: Stop, device) -> tuple[str, str]:
    """On a CPU-only run, a failure that says CUDA is missing is `skipped`, not the candidate's fault."""
    if device.type == "cpu" and stop.status in (Status.LOAD_ERROR, Status.COMPILE_ERROR, Status.RUNTIME_ERROR) \
            and any(text.lower() in stop.message.lower() for text in _NO_CUDA_MESSAGES):
        return Status.SKIPPED, f"needs a CUDA device ({stop.message})"
    return stop.status, stop.message


def _cpu_seconds() -> float:
    """CPU time of this worker and of the children it waited for (ninja, and through it the compilers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3)
