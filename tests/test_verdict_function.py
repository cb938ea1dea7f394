"""verdicts.decide, the one function that turns what an evaluation's stages found (failures.Evidence) into the
recorded outcome: one row per rule of who is to blame and which status it is. Torch-free and fast."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbench import flags
from kbench.failures import PHASES_BEFORE_THE_CANDIDATE, SWEEPING, Evidence, Kind, Party
from kbench.results import Outcome, Status, SweepResult
from kbench.schedule.job import SweepCounts
from kbench.verdicts import decide

C, R, J, M = Party.CANDIDATE, Party.REFERENCE, Party.JUDGE, Party.MACHINE
NOTING = sorted(flags.NOTING)[0]
OFFICIAL = Outcome(status=Status.CORRECT, message="", flags=())
SWEEP_AT = SimpleNamespace(sweep=SweepCounts(passed=2, run=2, total=8), current="N=37")  # a job.ProgressRecord


def lost(party, kind, phase="checking", **more):
    return Evidence(party, kind, f"runner killed by SIGKILL while {phase}", phase=phase, **more)


# (rule, evidence, decide's other arguments, expected status, a fragment of the message or None)
ROWS = [
    # Runners and workers lost: whose, and when.
    ("the runner died starting, before any candidate code", lost(C, Kind.DIED, started=False), {},
     Status.INFRA_ERROR, "(the runner died starting, before any candidate code)"),
    ("the runner hung starting", lost(C, Kind.SILENT, started=False), {}, Status.INFRA_ERROR, "died starting"),
    ("the candidate's runner died confining itself (the machine's)",
     Evidence(M, Kind.DIED, "runner killed by SIGKILL while the candidate's runner confined itself"), {},
     Status.INFRA_ERROR, "confined itself"),
    ("the reference's runner died", lost(R, Kind.DIED, phase="timing"), {}, Status.INFRA_ERROR, "while timing"),
    ("the reference's runner hung", lost(R, Kind.SILENT, phase="timing"), {}, Status.INFRA_ERROR, None),
    ("the candidate's runner died", lost(C, Kind.DIED), {}, Status.CRASHED, "SIGKILL while checking"),
    ("the candidate's runner was silent past the call limit", lost(C, Kind.SILENT), {}, Status.TIMEOUT, None),
    ("a candidate's runner lost before the candidate's phases", lost(C, Kind.DIED, phase="running the reference"),
     {}, Status.INFRA_ERROR, None),
    ("a lost worker before the candidate", lost(J, Kind.DIED, phase="running the reference"), {},
     Status.INFRA_ERROR, None),
    ("a hung worker before the candidate", lost(J, Kind.SILENT, phase="starting"), {}, Status.INFRA_ERROR, None),
    ("a lost worker after the candidate", lost(J, Kind.DIED), {}, Status.CRASHED, None),
    ("a hung worker after the candidate", lost(J, Kind.SILENT), {}, Status.TIMEOUT, None),
    ("the last evaluation on the device never ended",
     Evidence(M, Kind.SILENT, "the last evaluation on this device did not end within 120 s"), {},
     Status.INFRA_ERROR, "did not end"),
    # After the official verdict.
    ("a lost worker mid-sweep keeps its provisional verdict", lost(J, Kind.DIED, phase=SWEEPING),
     dict(official=OFFICIAL, progress=SWEEP_AT), Status.CORRECT, "sweep failed at N=37: runner killed"),
    ("a lost worker with a provisional verdict, not sweeping", lost(J, Kind.DIED),
     dict(official=OFFICIAL, progress=SWEEP_AT), Status.CRASHED, None),
    ("the candidate's runner dying mid-sweep ends the sweep", lost(C, Kind.DIED, phase=SWEEPING),
     dict(official=OFFICIAL, progress=SWEEP_AT), Status.CORRECT, "sweep failed at N=37"),
    ("the judge's own error mid-sweep ends the sweep", Evidence(J, Kind.RAISED, "RuntimeError: x", phase=SWEEPING),
     dict(official=OFFICIAL, progress=SWEEP_AT), Status.CORRECT, "sweep failed at N=37: RuntimeError: x"),
    ("a failure the stages report after the official verdict is its own",
     Evidence(C, Kind.WRONG_OUTPUT, "output 0 differs", phase=SWEEPING), dict(official=OFFICIAL, progress=SWEEP_AT),
     Status.INCORRECT, "output 0 differs"),
    ("a sweep that ended failing adds its flag", Evidence(C, Kind.PASSED),
     dict(official=OFFICIAL, sweep=SweepResult(passed=1, run=2, skipped=0, first_failure="N=3: differs")),
     Status.CORRECT, "sweep failed at N=3: differs"),
    # Memory.
    ("kbench's own out-of-memory", Evidence(J, Kind.OUT_OF_MEMORY, "OutOfMemoryError: x", phase="checking",
                                            held="its own copies held 70 GiB"), {},
     Status.INFRA_ERROR, "kbench ran out of GPU memory while checking: its own copies held 70 GiB"),
    ("the candidate's out-of-memory (its outputs did not fit)",
     Evidence(C, Kind.OUT_OF_MEMORY, "its outputs (8 bytes) did not fit", phase="checking"), {},
     Status.RUNTIME_ERROR, "failed while checking: its outputs"),
    ("the judge's out-of-memory kbench did not cause", Evidence(J, Kind.OUT_OF_MEMORY, "OOM", phase="checking"), {},
     Status.RUNTIME_ERROR, "failed while checking: OOM"),
    # The problem's failures.
    ("the reference failed", Evidence(R, Kind.RAISED, "reference forward failed: ValueError: x"), {},
     Status.REFERENCE_ERROR, "reference forward failed"),
    ("the problem file did not load", Evidence(R, Kind.LOAD_FAILED, "problem file defines no Model"), {},
     Status.REFERENCE_ERROR, None),
    ("the reference failed in its runner", Evidence(R, Kind.WRONG_OUTPUT, "the reference failed in its runner: x"),
     {}, Status.REFERENCE_ERROR, None),
    ("the reference failed at kbench's reduced sizes", Evidence(R, Kind.RAISED, "x"), dict(reduced_sizes="N=8"),
     Status.REFERENCE_ERROR, "(at kbench's reduced CPU sizes N=8; try --full-size)"),
    ("the judge's own error before the candidate", Evidence(J, Kind.RAISED, "KeyError: k", phase="loading problem"),
     {}, Status.REFERENCE_ERROR, "failed while loading problem: KeyError: k"),
    ("the judge's own error after the candidate", Evidence(J, Kind.RAISED, "KeyError: k", phase="timing"), {},
     Status.RUNTIME_ERROR, "failed while timing: KeyError: k"),
    # The candidate's.
    ("wrong outputs", Evidence(C, Kind.WRONG_OUTPUT, "trial 0 differs"), {}, Status.INCORRECT, "trial 0 differs"),
    ("a reply that broke the protocol", Evidence(C, Kind.BROKE_PROTOCOL, "x"), {}, Status.INCORRECT, None),
    ("a rejecting flag", Evidence(C, Kind.REJECTING_FLAG, "stale output"), {}, Status.REJECTED, "stale output"),
    ("a build failure", Evidence(C, Kind.BUILD_FAILED, "nvcc failed"), {}, Status.COMPILE_ERROR, "nvcc failed"),
    ("a load failure", Evidence(C, Kind.LOAD_FAILED, "no ModelNew"), {}, Status.LOAD_ERROR, "no ModelNew"),
    ("an exception in a call names the phase", Evidence(C, Kind.RAISED, "ValueError: v", phase="checking"), {},
     Status.RUNTIME_ERROR, "failed while checking: ValueError: v"),
    ("an exception already told with its phase", Evidence(C, Kind.RAISED, "failed while timing: E", phase="x"), {},
     Status.RUNTIME_ERROR, "failed while timing: E"),
    ("needs CUDA on a CPU-only run", Evidence(C, Kind.RAISED, "Torch not compiled with CUDA enabled"),
     dict(cpu_only=True), Status.SKIPPED, "needs a CUDA device (Torch not compiled with CUDA enabled)"),
    ("a load failure needing CUDA on a CPU-only run", Evidence(C, Kind.LOAD_FAILED, "CUDA_HOME is not set"),
     dict(cpu_only=True), Status.SKIPPED, "needs a CUDA device"),
    ("the same error on a GPU run is the candidate's", Evidence(C, Kind.RAISED, "Torch not compiled with CUDA"),
     {}, Status.RUNTIME_ERROR, None),
    ("CUDA kernels in the source on a CPU-only run",
     Evidence(C, Kind.NEEDS_CUDA, "needs a CUDA device (CUDA kernels in the source); none here"), {},
     Status.SKIPPED, "none here"),
    # kbench's and the machine's.
    ("kbench broke a rule of its own", Evidence(J, Kind.BROKE_RULE, "timed the reference first"), {},
     Status.INFRA_ERROR, None),
    ("a Ray node that sees other files", Evidence(M, Kind.MISCONFIGURED, "differs"), {}, Status.INFRA_ERROR, None),
    ("Ray lost the task", Evidence(M, Kind.DIED, "lost"), {}, Status.INFRA_ERROR, None),
    # Passes.
    ("every trial matched", Evidence(C, Kind.PASSED, "a note"), {}, Status.CORRECT, "a note"),
    ("a build-only run built", Evidence(C, Kind.BUILT), {}, Status.BUILT, None),
    ("strict and a noting flag", Evidence(C, Kind.PASSED),
     dict(official=Outcome(Status.CORRECT, flags=(NOTING,)), strict=True), Status.INCORRECT, None),
    ("strict and a noting flag, no sweep run", Evidence(C, Kind.PASSED, "noted"), dict(flags=(NOTING,), strict=True),
     Status.INCORRECT, "noted"),
    ("a noting flag without --strict", Evidence(C, Kind.PASSED), dict(official=Outcome(Status.CORRECT,
                                                                                        flags=(NOTING,))),
     Status.CORRECT, None),
    ("strict and a failed sweep", Evidence(C, Kind.PASSED),
     dict(official=OFFICIAL, strict=True, sweep=SweepResult(passed=0, run=1, skipped=0, first_failure="N=3: x")),
     Status.INCORRECT, "sweep failed"),
]


@pytest.mark.parametrize("rule, evidence, arguments, status, fragment", ROWS, ids=[row[0] for row in ROWS])
def test_each_rule(rule, evidence, arguments, status, fragment):
    outcome = decide(evidence, **arguments)
    assert outcome.status == status, (rule, outcome)
    if fragment is not None:
        assert fragment in outcome.message, (rule, outcome.message)


# Whole messages, where a rule builds them (the rows above check fragments).
MESSAGES = [
    ("the reference failed at the official sizes: no hint", Evidence(R, Kind.RAISED, "x"), {}, "x"),
    ("a runtime error already told with its phase is not told twice",
     Evidence(C, Kind.RAISED, "failed while timing: E", phase="timing"), {}, "failed while timing: E"),
    ("only a runtime error is told with its phase", Evidence(C, Kind.WRONG_OUTPUT, "trial 0 differs", phase="x"), {},
     "trial 0 differs"),
    ("the official message and the sweep's failure, joined",
     Evidence(C, Kind.PASSED), dict(official=replace(OFFICIAL, message="noted"),
                                    sweep=SweepResult(passed=0, run=1, skipped=0, first_failure="N=3: x")),
     "noted; sweep failed at N=3: x"),
    ("lost after the sweep's last configuration", lost(C, Kind.DIED, phase=SWEEPING),
     dict(official=OFFICIAL, progress=SimpleNamespace(sweep=SweepCounts(passed=8, run=8, total=8), current="")),
     "sweep failed at after the sweep: runner killed by SIGKILL while sweeping"),
]


@pytest.mark.parametrize("rule, evidence, arguments, message", MESSAGES, ids=[row[0] for row in MESSAGES])
def test_each_message(rule, evidence, arguments, message):
    assert decide(evidence, **arguments).message == message, rule


def test_a_pass_with_a_failed_sweep_and_no_official_verdict_yet_carries_the_sweep():
    sweep = SweepResult(passed=0, run=1, skipped=0, first_failure="N=3: x")
    outcome = decide(Evidence(C, Kind.PASSED), sweep=sweep)
    assert outcome.sweep == sweep and flags.SWEEP_FAILED in outcome.flags


def test_a_runner_lost_mid_sweep_under_strict_fails_a_noted_official_verdict():
    official = Outcome(Status.CORRECT, flags=(NOTING,))
    assert decide(lost(C, Kind.DIED, phase=SWEEPING), official=official, progress=SWEEP_AT, strict=True).status \
        == Status.INCORRECT


def test_the_candidate_s_own_failure_after_the_official_verdict_does_not_only_end_the_sweep():
    outcome = decide(Evidence(C, Kind.RAISED, "ValueError: v", phase=SWEEPING), official=OFFICIAL, progress=SWEEP_AT)
    assert outcome.status == Status.RUNTIME_ERROR, outcome


def test_an_error_without_cuda_s_words_on_a_cpu_only_run_is_the_candidate_s():
    assert decide(Evidence(C, Kind.RAISED, "ValueError: v"), cpu_only=True).status == Status.RUNTIME_ERROR


def test_a_lost_configuration_counts_as_run_and_keeps_the_skipped_ones():
    progress = SimpleNamespace(sweep=SweepCounts(passed=2, run=2, skipped=3, total=8), current="N=37")
    outcome = decide(lost(C, Kind.DIED, phase=SWEEPING), official=OFFICIAL, progress=progress)
    assert (outcome.sweep.passed, outcome.sweep.run, outcome.sweep.skipped) == (2, 3, 3)


def test_an_official_verdict_lost_mid_sweep_stands_with_the_sweep_failed_flag():
    outcome = decide(lost(J, Kind.DIED, phase=SWEEPING), official=OFFICIAL, progress=SWEEP_AT)
    assert flags.SWEEP_FAILED in outcome.flags and outcome.sweep.run == 3 and outcome.sweep.passed == 2


@pytest.mark.parametrize("phase", [*PHASES_BEFORE_THE_CANDIDATE, "loading solution", "checking", "timing", SWEEPING])
@pytest.mark.parametrize("kind", [Kind.DIED, Kind.SILENT])
@pytest.mark.parametrize("started", [True, False])
def test_the_reference_runner_s_death_is_never_blamed_on_the_candidate(phase, kind, started):
    outcome = decide(lost(R, kind, phase=phase, started=started))
    assert outcome.status == Status.INFRA_ERROR, outcome


def test_the_fields_the_stages_collected_go_into_the_outcome():
    outcome = decide(Evidence(C, Kind.WRONG_OUTPUT, "x"), flags=("weak_check",), sizes="N=8", build_s=1.5)
    assert (outcome.flags, outcome.sizes, outcome.build_s) == (("weak_check",), "N=8", 1.5)


def test_no_module_but_verdicts_picks_a_failure_status():
    """Modules that read statuses (reports, the KernelBench entry point's translation, the results' own helpers)
    are left out."""
    failures = "|".join(name for name in vars(Status) if name.isupper() and name not in ("CORRECT", "BUILT", "FINAL"))
    root = Path(__file__).resolve().parents[1] / "kbench"
    readers = {"verdicts.py", "results.py", "kernelbench_entry.py"}
    pickers = [str(path.relative_to(root)) for path in root.rglob("*.py")
               if path.name not in readers and "report" not in path.parts
               and re.search(rf"Status\.({failures})\b", path.read_text())]
    assert not pickers, pickers
