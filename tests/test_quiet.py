"""Waiting until the GPU is free of a stopped candidate's queued work (kbench/judge/quiet.py): the waiting rule,
with probes that take real time on the host. The probe of a real GPU runs in tests/test_gpu.py."""

from __future__ import annotations

import time

from kbench.judge.quiet import wait_until_quiet


class SleepingProbe:
    """A probe that takes each of `durations_ms` in turn, then `after_ms` every time; counts its calls."""

    def __init__(self, durations_ms: list[float], after_ms: float):
        self.remaining, self.after_ms, self.calls = list(durations_ms), after_ms, 0

    def __call__(self) -> float:
        self.calls += 1
        taken_ms = self.remaining.pop(0) if self.remaining else self.after_ms
        time.sleep(taken_ms / 1e3)
        return taken_ms


def test_waits_until_a_probe_comes_back_fast():
    probe = SleepingProbe([20.0, 20.0, 20.0], 0.0)
    spent_ms, quiet = wait_until_quiet(probe, free_ms=5.0, cap_s=2.0)
    assert quiet and probe.calls == 4 and spent_ms >= 60.0


def test_a_free_gpu_costs_one_probe():
    probe = SleepingProbe([], 0.0)
    _, quiet = wait_until_quiet(probe, free_ms=5.0, cap_s=2.0)
    assert quiet and probe.calls == 1


def test_a_gpu_busy_past_the_cap_is_reported():
    started = time.perf_counter()
    spent_ms, quiet = wait_until_quiet(SleepingProbe([], 10.0), free_ms=5.0, cap_s=0.1)
    assert not quiet and 100.0 <= spent_ms and time.perf_counter() - started < 1.0
