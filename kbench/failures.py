"""Failures as data, not tracebacks: the evidence a stage of an evaluation finds (who failed, what happened, in
which phase, told in one line), Stop, which ends an evaluation early carrying that evidence, and one_line, an
exception told in one line. No status is picked here: verdicts.decide turns evidence into the recorded outcome.

Torch-free and at the bottom: the judge's stages, the runner's wire, the parent (a lost worker) and the Ray
executor all describe what they found with these types."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# The judge's phases before the candidate's code exists anywhere: a failure in them is never the candidate's.
WAITING_FOR_THE_LAST = "waiting for the last evaluation to end"
PHASES_BEFORE_THE_CANDIDATE = ("starting", WAITING_FOR_THE_LAST, "loading problem", "running the reference",
                               "timing the reference alone")
SWEEPING = "sweeping"  # the phase after the official verdict: the random parameter sweep


class Party(Enum):
    """Who failed."""

    CANDIDATE = "candidate"  # the solution: its code, in the candidate's runner (or its file)
    REFERENCE = "reference"  # the problem: its file, its Model and inputs, in the judge or the reference's runner
    JUDGE = "judge"          # kbench's worker process itself: its own code, or the whole worker lost
    MACHINE = "machine"      # what runs kbench: a runner that failed setting itself up, a device, a Ray node


class Kind(Enum):
    """What happened."""

    PASSED = "passed"                  # nothing failed: every trial matched (with an official verdict: the end)
    BUILT = "built"                    # a build-only run imported the solution and built it
    WRONG_OUTPUT = "wrong output"      # outputs that do not match, cannot be read, or are not what they must be
    BROKE_PROTOCOL = "broke protocol"  # a runner's reply the wire protocol does not allow
    REJECTING_FLAG = "rejecting flag"  # a guard raised a flag that rejects (flags.REJECTING)
    BUILD_FAILED = "build failed"      # an extension did not build
    LOAD_FAILED = "load failed"        # a file did not import, lacks a name, or cannot be read
    RAISED = "raised"                  # an exception in a call (or in the judge's own code)
    OUT_OF_MEMORY = "out of memory"    # an allocation failed
    DIED = "died"                      # a process died (signal or exit code)
    SILENT = "silent"                  # no answer within a limit (and killed)
    NEEDS_CUDA = "needs CUDA"          # the solution needs a CUDA device on a CPU-only run
    BROKE_RULE = "broke a rule"        # kbench broke a rule of its own (an order it keeps)
    MISCONFIGURED = "misconfigured"    # the machine cannot judge as it must (a node that sees other files)


# What a runner may report of its own failures (runner/wire.py RUNNER_FAILURES), as evidence.
RUNNER_REPORTS = {"load_error": Kind.LOAD_FAILED, "compile_error": Kind.BUILD_FAILED, "runtime_error": Kind.RAISED}


@dataclass(frozen=True)
class Evidence:
    """What a stage found. `message` is the one line the row will say (verdicts.decide may add to it)."""

    party: Party
    kind: Kind
    message: str = ""
    phase: str = ""        # the judge's phase when it was found ("" where it does not matter)
    started: bool = True   # DIED/SILENT: the runner had started (answered ready) before it was lost
    held: str = ""         # OUT_OF_MEMORY of the judge's: what kbench's processes held, where the shortage is theirs


class Stop(Exception):
    """Ends an evaluation early with the evidence of why (a failure is data, not a traceback)."""

    def __init__(self, evidence: Evidence):
        super().__init__(evidence.message)
        self.evidence = evidence

    @property
    def message(self) -> str:
        return self.evidence.message


def one_line(error: BaseException) -> str:
    """'TypeError: first line of the message'."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
