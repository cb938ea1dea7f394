"""A runner lost: it died (its pipe closed) or gave no answer in time (and the judge killed it), and what that tells
in the phase it happened (verdicts.decide says whose fault it was)."""

from __future__ import annotations

from kbench.failures import Evidence, Kind, Party
from kbench.processes import signal_name


class RunnerDied(Exception):
    """The runner's pipe closed: it exited or was killed (`returncode` as subprocess gives it). `ready`: it had
    finished starting (its CUDA context) and could have run the candidate's code. `runner`: the RunnerProcess."""

    def __init__(self, returncode: int | None, runner=None, ready: bool = True):
        self.returncode = returncode
        self.runner = runner
        self.ready = ready
        super().__init__(describe_exit(returncode))


class RunnerSilent(RunnerDied):
    """The runner gave no answer within the limit the judge set for the request (RunnerProcess.answer_limit); the
    judge killed it."""

    def __init__(self, limit_s: float, basis: str, runner):
        super().__init__(None, runner)
        self.limit_s, self.basis = limit_s, basis
        self.args = (f"no answer within {limit_s:.3g} s ({basis}): the judge killed it",)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the runner stopped answering"
    if returncode < 0:
        return f"the runner was killed by {signal_name(-returncode)}"
    return f"the runner exited with code {returncode}"


def evidence_of(error: RunnerDied, phase: str, party: Party) -> Evidence:
    """What a runner (`party`'s) that died (with its exit) or did not answer in time (and was killed) tells, in the
    phase it was lost in; whether it had started (answered ready). verdicts.decide says whose fault it was."""
    if isinstance(error, RunnerSilent):
        return Evidence(party, Kind.SILENT, f"{error} while {phase}", phase=phase, started=error.ready)
    return Evidence(party, Kind.DIED, f"{describe_exit(error.returncode)} while {phase}", phase=phase,
                    started=error.ready)
