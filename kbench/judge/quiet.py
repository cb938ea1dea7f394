"""Before the judge times any side: a GPU free of the work queued before it, the candidate's runner's above all.

Stopping the candidate's runner while the reference is timed (remote_process.RunnerProcess.pause) stops its
threads, not the kernels they queued: those run on and, as GPU contexts of different processes take turns on the
device, slow whatever is timed beside them, a gain the candidate's own times never show. So once the runner is
stopped, the judge probes the device (a one-element add in its own context and a synchronisation, on its host
clock) until a probe comes back as fast as it did before the candidate was imported, and only then times the
other side. The reference is timed on a free GPU. One still busy after WAIT_CAP_S is put to the test: the judge
kills the candidate's runner (its GPU work goes with its context). A GPU free within KILLED_CAP_S after that ran the
candidate's work: `slowed_reference`, which rejects. One still busy runs another process's work, which no candidate
is blamed for: the evaluation ends as the machine's failure (infra_error: `--only-failed` runs it again).
The same wait comes before the candidate's batches too, with the reference's runner stopped: every side's batch
starts from the same state (sides.py).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from kbench import flags
from kbench.failures import Evidence, Kind, Party, Stop

CALIBRATION_PROBES = 32
FREE_FACTOR = 3.0   # a probe within this many times the idle GPU's median probe (and FREE_MIN_MS) finds it free
FREE_MIN_MS = 0.1   # below this the host's own scheduling decides, not the GPU
WAIT_CAP_S = 2.0
KILLED_CAP_S = 5.0  # a killed runner's context is torn down, its kernels with it, well within this
SWITCH_MS = 1.0     # a wait up to this long is the GPU switching to the judge's context, not work left queued


def wait_until_quiet(probe: Callable[[], float], free_ms: float, cap_s: float,
                     clock: Callable[[], float] = time.perf_counter) -> tuple[float, bool]:
    """Probe until one takes at most `free_ms`: (milliseconds spent, whether one did within `cap_s`)."""
    started = clock()
    while probe() > free_ms:
        if clock() - started >= cap_s:
            return (clock() - started) * 1e3, False
    return (clock() - started) * 1e3, True


class QuietGpu:
    """The judge's probe of its device, measured on the idle GPU (calibrate) before the candidate is imported.
    `kill_candidate`: kills the candidate's runner (and whatever it started)."""

    def __init__(self, device, kill_candidate: Callable[[], None]):
        self.device = device
        self.kill_candidate = kill_candidate
        self.cell = torch.zeros(1, device=device)
        self.free_ms = FREE_MIN_MS
        self.busy_waits = 0      # waits longer than a context switch: the GPU ran the candidate's queued work
        self.busy_ms = 0.0       # milliseconds spent in those waits

    def calibrate(self) -> None:
        torch.cuda.synchronize(self.device)
        self.free_ms = max(FREE_FACTOR * statistics.median(self.probe_ms() for _ in range(CALIBRATION_PROBES)),
                           FREE_MIN_MS)

    def probe_ms(self) -> float:
        started = time.perf_counter()
        self.cell.add_(1)
        torch.cuda.synchronize(self.device)
        return (time.perf_counter() - started) * 1e3

    def wait(self, findings) -> None:
        """After the candidate's runner is stopped: returns once the GPU is free. Still busy after WAIT_CAP_S, the
        candidate's runner is killed: `slowed_reference` (raised) if that frees the GPU, else a Stop of the
        machine's (another process's work)."""
        torch.cuda.synchronize(self.device)  # the judge's own work (the round's input copies) is not the candidate's
        spent_ms, quiet = wait_until_quiet(self.probe_ms, self.free_ms, WAIT_CAP_S)
        if spent_ms > SWITCH_MS:
            self.busy_waits += 1
            self.busy_ms += spent_ms
        if quiet:
            return
        self.kill_candidate()
        killed_ms, quiet = wait_until_quiet(self.probe_ms, self.free_ms, KILLED_CAP_S)
        if not quiet:
            raise Stop(Evidence(Party.MACHINE, Kind.RAISED, (
                f"the GPU stayed busy for {WAIT_CAP_S:g} s with the candidate's runner stopped, and for "
                f"{KILLED_CAP_S:g} s more once it was killed: another process's work; re-run on a GPU of its own")))
        findings.flag(flags.SLOWED_REFERENCE, f"the GPU stayed busy for {WAIT_CAP_S:g} s after the candidate's "
                                              f"runner was stopped, and came free {killed_ms:.0f} ms after it was "
                                              f"killed (work it queued before it replied)")
        findings.raise_if_rejected()

    def describe(self) -> str:
        return (f"before timing a side, waited {self.busy_waits} time(s), {self.busy_ms:.3g} ms in all, for the GPU "
                f"to finish work queued before (the candidate's runner's: the reference's runner leaves none)")
