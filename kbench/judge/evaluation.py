"""One evaluation, as the judge runs it: load the problem, run the reference (the problem's Model is built in the
reference's runner meanwhile) and time that one alone, have the candidate's runner import the solution
(building its extensions) and build ModelNew, run the correctness trials, time both runners' models, sweep.
The candidate's code runs only in its runner (remote.py). Every failure on the way is evidence (a Stop's, a
runner lost, an error of the judge's own) that verdicts.decide turns into the outcome; so is the pass."""

from __future__ import annotations

import os
import random
import resource
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch

from kbench import params, verdicts
from kbench.extensions.cache import copy_new_entries, solution_folder
from kbench.extensions.wrappers import compiler_wrappers
from kbench.extensions.primer import compilers_root, headers_root
from kbench.schedule.job import Job
from kbench.failures import RUNNER_REPORTS, WAITING_FOR_THE_LAST, Evidence, Kind, Party, Stop, one_line
from kbench.loading import load_problem, release_cached_memory
from kbench.judge.measure import measure
from kbench.judge.param_sweep import run_sweep
from kbench.problem import overridden
from kbench.processes import open_log
from kbench.judge.progress import Context, Findings, Progress, answer_limit
from kbench.judge.instances import new_candidate
from kbench.judge.remote import RemoteModel
from kbench.judge.remote_process import Runners
from kbench.judge.runner_lost import RunnerDied, describe_exit, evidence_of
from kbench.results import Outcome
from kbench.runner import wire
from kbench.judge.trials import OfficialTrials, guard_modes, plan_instances
from kbench.judge.reference_side import (Reference, check_slowed_reference, reference_call_s, reference_first,
                                         reference_in_runner)

def judge(job: Job, device: torch.device, progress: Progress, environment: dict, runners: Runners) -> Outcome:
    """The outcome of `job`; `environment` (device name, versions) goes into it as it is. `runners` are this
    evaluation's (started, perhaps warm); they are killed before this returns, and reaped by the caller once
    the outcome is written (their exits overlap the parent's next evaluation, whose judge waits for this one's
    exit before it times anything: LastEnding)."""
    context = Context(job.config, device, progress, Findings(progress), runner=runners.candidate,
                      reference_runner=runners.reference)
    progress.update(runner_sessions=runners.sessions)

    def finish(outcome: Outcome) -> Outcome:
        return replace(outcome, sizes=context.sizes, build_s=context.build.seconds,
                       build_reused=context.build.reused, phase_s=progress.phases(), **environment)
    try:
        outcome = _decided(job, context, finish)
    finally:
        runners_cpu_s = runners.cpu_seconds()  # read before the kill: they are reaped after the outcome is written
        with progress.spent("stopping the runners"):
            runners.kill()
        if context.triton_caches is not None:  # what the candidate's kernels compiled, for its next evaluation
            copy_new_entries(*context.triton_caches)
    return replace(outcome, cpu_s=_cpu_seconds(runners_cpu_s), phase_s=progress.phases())


def _decided(job: Job, context: Context, finish) -> Outcome:
    """The evaluation's outcome: the stages' own, or what verdicts.decide makes of the evidence of a failure."""
    progress = context.progress
    try:
        return finish(_stages(job, context, finish))
    except RunnerDied as died:  # whose runner it was, and when: decide places the blame
        party = Party.REFERENCE if died.runner is context.reference_runner else Party.CANDIDATE
        evidence = evidence_of(died, progress.record.phase, party)
    except Stop as stop:
        evidence = replace(stop.evidence, phase=stop.evidence.phase or progress.record.phase)
    except Exception as error:  # raised outside a Stop: the judge's own CUDA context failed, say
        traceback.print_exc()
        kind = Kind.OUT_OF_MEMORY if isinstance(error, torch.OutOfMemoryError) else Kind.RAISED
        held = _kbench_held_the_card(error, context) if context.official is None else ""
        evidence = Evidence(Party.JUDGE, kind, one_line(error), phase=progress.record.phase, held=held)
    reduced = context.sizes if context.sizes and not job.overrides else ""
    return finish(context.findings.outcome(evidence, official=context.official, progress=progress.record,
                                           strict=context.config.strict, cpu_only=context.device.type == "cpu",
                                           reduced_sizes=reduced, check=context.check))


def _kbench_held_the_card(error: Exception, context: Context) -> str:
    """What kbench's processes held when the judge's own allocation failed, if they, not the candidate's runner,
    hold the card (verdicts.memory_shortage); else ""."""
    if not isinstance(error, torch.OutOfMemoryError) or context.device.type != "cuda":
        return ""
    return verdicts.memory_shortage(str(error), context.runner.process.pid, context.reference_runner.process.pid,
                                    torch.cuda.memory_allocated(context.device),
                                    torch.cuda.get_device_properties(context.device).total_memory)


def _stages(job: Job, context: Context, finish) -> Outcome:
    config, progress = context.config, context.progress
    context.confined = _send_job(job, context)  # a build's runner confines itself while the judge goes on
    context.last_ending = LastEnding(job.wait_for, progress)
    progress.enter("loading problem")
    problem_module = load_problem(job.problem_path)
    overrides = dict(job.overrides)
    if context.device.type == "cpu" and not config.full_size and not overrides:
        overrides = params.small_overrides(problem_module)
    context.overrides = overrides
    if job.build_only:
        _import_solution(job, context)
        return context.findings.outcome(Evidence(Party.CANDIDATE, Kind.BUILT))
    with torch.no_grad():
        with overridden(problem_module, overrides):
            reference = reference_first(job, problem_module, context)
            if config.time:
                reference.timed, reference.alone, reference.alone_held = reference_in_runner(job, reference, context)
            call_s = reference_call_s(reference, context)
            progress.limit_run(call_s, config)
            context.runner.answer_limit = answer_limit(call_s, config)
            _import_solution(job, context)
            official = context.official = _official_verdict(reference, context)
        context.reference_runner.kill()  # nothing after the official verdict needs it: its exit overlaps the sweep
        progress.update(provisional=finish(official))  # survives a sweep that kills the judge
        sweep = run_sweep(problem_module, context) if config.sweep > 0 else None
    return verdicts.decide(Evidence(Party.CANDIDATE, Kind.PASSED), official=official, sweep=sweep, strict=config.strict)


def _send_job(job: Job, context: Context) -> Callable[[], None]:
    """Give the candidate's runner its job's settings, which it takes first of all; returns what waits for it to
    be confined and warmed up. An evaluation's runner confined itself to its own folders at its start: it loads
    the extensions the build phase left in the cache as they are, and its Triton cache is a copy of the
    solution's in its scratch folder (its new entries copied back when the evaluation ends: only the judge writes the
    solution's Triton folder). A build's runner confines itself now, to its own solution's extension folder besides
    its own: the compiler wrappers (the judge writes them here) and the precompiled headers (primer.py) that every
    later build runs are out of its reach."""
    config, runner = context.config, context.runner
    extensions = solution_folder(config.cache_dir, "extensions", Path(job.solution_path))
    triton = solution_folder(config.cache_dir, "triton", Path(job.solution_path))
    context.build_folder = extensions
    triton_cache = runner.scratch / "triton"
    if job.build_only:  # its kernels compile when first called, in the evaluation: its Triton cache stays its own
        extensions.mkdir(parents=True, exist_ok=True)
    else:
        copy_new_entries(triton, triton_cache)
        context.triton_caches = (triton_cache, triton)
    compilers, headers = compilers_root(config.cache_dir), headers_root(config.cache_dir)
    writable = [*runner.own_folders(), extensions] if job.build_only else []
    readable = [compilers, headers] if job.build_only else []
    if not job.build_only:  # confined before the job came, it reads no build cache: its wrappers are in its inputs
        compilers, headers = runner.inputs / "compilers", runner.inputs / "no-precompiled-headers"
    environment = compiler_wrappers(compilers, headers)
    runner.send({"op": "job", "environment": environment, "triton_cache": str(triton_cache),
                 "log": bool(job.log_path), "writable": [str(folder) for folder in writable],
                 "readable": [str(folder) for folder in readable]})
    if job.log_path:
        log = open_log(job.log_path)
        try:
            runner.send_descriptor(log)
        finally:
            os.close(log)

    def confined() -> None:
        try:
            reply = runner.reply()
        except RunnerDied as died:  # no candidate code has run in it yet
            raise Stop(Evidence(Party.MACHINE, Kind.DIED, f"{describe_exit(died.returncode)} while the candidate's "
                                                          f"runner confined itself and warmed up, before any "
                                                          f"candidate code"))
        for note in reply.get("notes") or []:
            if isinstance(note, str):
                print(f"kbench: runner: {note}", flush=True)
        failure = wire.Failure.in_reply(reply)
        if failure is not None:
            raise Stop(Evidence(Party.MACHINE, Kind.RAISED, f"the candidate's runner failed confining itself or "
                                                            f"warming up, before any candidate code: "
                                                            f"{failure.message}"))
    return confined


def _import_solution(job: Job, context: Context) -> None:
    """The runner (confined by now) imports the solution in the problem's namespace, building its extensions; a
    failure there is the candidate's (compile_error, load_error)."""
    progress = context.progress
    context.last_ending.wait()  # nothing of the candidate's runs before
    progress.enter("loading solution")
    context.confined()
    runner = context.runner
    # The job's files as the runner may read them (lent to its inputs folder), not the folders they are in.
    extensions = context.build_folder if job.build_only else runner.lend_builds(context.build_folder)
    message = {"op": "load", "problem": str(runner.lend(job.problem_path, "problem")),
               "solution": str(runner.lend(job.solution_path, "solution")), "policy": context.config.policy,
               "extensions": str(extensions), "log_path": job.log_path}

    def building(update: wire.Progress) -> None:
        progress.update(building=update.building, build_since=update.since)
    reply = runner.request(message, on_progress=building)
    progress.update(building="", build_since=None)
    context.build = wire.BuildInfo.from_wire(reply.get("build"))
    progress.update(build_s=context.build.seconds)
    if runner.freezer is None and not job.build_only:
        print("kbench: runner: no cgroup could be made for it: a process it moves out of its process group is "
              "not stopped while the reference is timed", flush=True)
    failure = wire.Failure.in_reply(reply)
    if failure is not None:
        raise Stop(Evidence(Party.CANDIDATE, RUNNER_REPORTS[failure.status], failure.message))


def _official_verdict(reference: Reference, context: Context) -> Outcome:
    """Correct (with its timing and flags) at the official sizes (or the CPU's reduced ones), or a Stop. The
    trials run on several instances of ModelNew, each built afresh as the sweep's are (trials.plan_instances),
    and the one timed, after its trials, is drawn by the judge: no instance is the official one."""
    config = context.config
    plan = plan_instances(config.trials, guard_modes(context), random.SystemRandom())
    trials = OfficialTrials(reference.model, reference.make_inputs, reference.ops, context, reference.mutates_inputs)
    timed = None
    for index, calls in enumerate(plan.calls):
        candidate = _new_instance(reference, context)
        context.progress.enter("checking")
        trials.run(candidate, calls)
        if index == plan.timed and config.time and trials.passing:
            timed = measure(reference.model, reference.timed, candidate, reference.make_inputs, trials.so_far(),
                            context)
            reference.timed.release_arenas()  # the trials after the timing need the room, as those before did
        del candidate  # with its copies of timed outputs, before the next instance is built
    result = trials.finish()
    if timed and reference.alone:
        check_slowed_reference(reference, timed, context)
    return context.findings.outcome(Evidence(Party.CANDIDATE, Kind.PASSED, context.findings.message),
                                    check=result.check, reference_alone=reference.alone,
                                    **(timed.fields() if timed else {}))


def _new_instance(reference: Reference, context: Context) -> RemoteModel:
    """A new ModelNew in the runner (its last instance goes), built as every other: same arguments, same seed."""
    context.progress.enter("building ModelNew")
    release_cached_memory(context.device)  # what the reference's calls freed: the candidate may need it
    return new_candidate(context.runner, reference.init_inputs, context.config.seed, context.overrides,
                         reference.room, context.config.precision)


def _cpu_seconds(runners_cpu_s: float) -> float:
    """CPU time of the judge, of the children it waited for, and of its runners (through them the compilers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + runners_cpu_s, 3)


class LastEnding:
    """The last evaluation on this device, still ending when this one starts (its judge's CUDA context going):
    `marker` (Job.wait_for, "" for none) appears once it and its runners are gone. This judge runs its reference
    meanwhile, and waits for it before anything is timed and before any of the candidate's code runs."""

    def __init__(self, marker: str, progress: Progress):
        self.marker = marker
        self.progress = progress

    @property
    def pending(self) -> bool:
        return bool(self.marker)

    def wait(self) -> None:
        """Until the last evaluation has ended (at once after the first time)."""
        if self.marker:
            self.progress.enter(WAITING_FOR_THE_LAST)
            wait_for_file(Path(self.marker), LAST_ENDING_S)
            self.marker = ""


WAIT_STEP_S = 0.002
LAST_ENDING_S = 120.0  # the parent kills a worker still ending after pool.ENDING_S; beyond this, something broke


def wait_for_file(path: Path, limit_s: float) -> None:
    """Until `path` exists (the parent makes it once the last evaluation on this device has ended); a Stop
    (infra_error) after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise Stop(Evidence(Party.MACHINE, Kind.SILENT,
                                f"the last evaluation on this device did not end within {limit_s:g} s"))
        time.sleep(WAIT_STEP_S)
