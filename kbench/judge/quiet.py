"""Before the judge times anything but the candidate: a GPU free of the work the candidate's runner queued.

Stopping the candidate's runner while the reference is timed (remote_process.RunnerProcess.pause) stops its
threads, not the kernels they queued: those run on and, as GPU contexts of different processes take turns on the
device, slow whatever is timed beside them, a gain the candidate's own times never show. So once the runner is
stopped, the judge probes the device (a one-element add in its own context and a synchronisation, on its host
clock) until a probe comes back as fast as it did before the candidate was imported, and only then times the
other side. The reference is timed on a free GPU; one still busy after WAIT_CAP_S rejects (`slowed_reference`).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from kbench import flags

CALIBRATION_PROBES = 32
FREE_FACTOR = 3.0   # a probe within this many times the idle GPU's median probe (and FREE_MIN_MS) finds it free
FREE_MIN_MS = 0.1   # below this the host's own scheduling decides, not the GPU
WAIT_CAP_S = 2.0
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
    """The judge's probe of its device, measured on the idle GPU (calibrate) before the candidate is imported."""

    def __init__(self, device):
        self.device = device
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

    def wait(self, findings) -> bool:
        """After the candidate's runner is stopped: whether the GPU became free within WAIT_CAP_S; if not,
        `slowed_reference` is flagged (the caller ends the evaluation)."""
        torch.cuda.synchronize(self.device)  # the judge's own work (the round's input copies) is not the candidate's
        spent_ms, quiet = wait_until_quiet(self.probe_ms, self.free_ms, WAIT_CAP_S)
        if spent_ms > SWITCH_MS:
            self.busy_waits += 1
            self.busy_ms += spent_ms
        if not quiet:
            findings.flag(flags.SLOWED_REFERENCE, f"the GPU stayed busy for {WAIT_CAP_S:g} s after the candidate's "
                                                  f"runner was stopped (work it queued before it replied)")
        return quiet

    def describe(self) -> str:
        return (f"before timing the reference, waited {self.busy_waits} time(s), {self.busy_ms:.3g} ms in all, for the "
                f"GPU to finish work the candidate queued before its runner was stopped")
