"""Timers behind one small interface, and the interleaved sampling loop.

A timer turns one call into milliseconds. The sampling loop only sees that interface, so tests drive
it with a fake clock and the GPU path uses CUDA events with an L2 flush.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

from kbench import stats

# Never sample fewer than this, even when the time budget is spent: a median needs a few points.
MIN_SAMPLES_ALWAYS = 3


class Timer(Protocol):
    name: str

    def measure(self, call: Callable[[], object]) -> float:
        """Run `call` once and return its duration in milliseconds."""


class HostTimer:
    """Wall clock around the call; right for CPU work, which is synchronous."""

    name = "host-clock"

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock

    def measure(self, call: Callable[[], object]) -> float:
        start = self.clock()
        call()
        return (self.clock() - start) * 1e3


class CudaEventTimer:
    """CUDA events on the current stream around the call, after an L2 flush.

    The flush writes a buffer twice the size of L2 before the start event, so neither model finds
    its inputs or weights warm in cache from the previous call; the flush itself is not timed.
    """

    name = "cuda-events"

    def __init__(self, device):
        import torch

        self._torch = torch
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush_buffer = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.int8, device=device)

    def measure(self, call: Callable[[], object]) -> float:
        torch = self._torch
        self.flush_buffer.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


@dataclass(frozen=True)
class StopRule:
    warmup: int               # untimed calls of each side first
    min_samples: int          # samples before the precision target may stop sampling
    max_samples: int          # hard cap
    target_rse: float         # stop once both sides' relative standard error is below this
    budget_s: float           # stop once this much wall time has gone into sampling

    def done(self, reference_ms: list[float], candidate_ms: list[float], elapsed_s: float) -> bool:
        count = min(len(reference_ms), len(candidate_ms))
        if count < MIN_SAMPLES_ALWAYS:
            return False
        if count >= self.max_samples or elapsed_s >= self.budget_s:
            return True
        precise = (stats.relative_standard_error(reference_ms) < self.target_rse
                   and stats.relative_standard_error(candidate_ms) < self.target_rse)
        return count >= self.min_samples and precise


def sample_interleaved(reference: Callable[[], object], candidate: Callable[[], object],
                       timer: Timer, rule: StopRule,
                       clock: Callable[[], float] = time.monotonic) -> tuple[list[float], list[float]]:
    """Time reference and candidate alternately, so drift in clocks or load cancels in the ratio."""
    for _ in range(rule.warmup):
        timer.measure(reference)
        timer.measure(candidate)
    reference_ms: list[float] = []
    candidate_ms: list[float] = []
    started = clock()
    while not rule.done(reference_ms, candidate_ms, clock() - started):
        reference_ms.append(timer.measure(reference))
        candidate_ms.append(timer.measure(candidate))
    return reference_ms, candidate_ms
