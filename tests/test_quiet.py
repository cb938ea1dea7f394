"""Waiting until the GPU is free of a stopped candidate's queued work (kbench/judge/quiet.py): the waiting rule,
with probes that take real time on the host. The probe of a real GPU runs in tests/test_gpu.py."""

from __future__ import annotations

import time

from kbench.judge.quiet import wait_until_quiet


def sleeping_probe(durations_ms: list[float], after_ms: float):
    """A probe that takes each of `durations_ms` in turn, then `after_ms` every time."""
    remaining = list(durations_ms)

    def probe() -> float:
        taken_ms = remaining.pop(0) if remaining else after_ms
        time.sleep(taken_ms / 1e3)
        return taken_ms
    return probe


def test_waits_until_a_probe_comes_back_fast():
    spent_ms, quiet = wait_until_quiet(sleeping_probe([20.0, 20.0, 20.0], 0.0), free_ms=5.0, cap_s=2.0)
    assert quiet and 60.0 <= spent_ms < 1000.0


def test_a_free_gpu_costs_one_probe():
    probe = sleeping_probe([], 0.0)
    spent_ms, quiet = wait_until_quiet(probe, free_ms=5.0, cap_s=2.0)
    assert quiet and spent_ms < 5.0


def test_a_gpu_busy_past_the_cap_is_reported():
    started = time.perf_counter()
    spent_ms, quiet = wait_until_quiet(sleeping_probe([], 10.0), free_ms=5.0, cap_s=0.1)
    assert not quiet and 100.0 <= spent_ms and time.perf_counter() - started < 1.0
