"""The slowed-reference rules: a real slowdown is named, noise is not (stats.slowdown)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from kbench import stats
from kbench.judge import timing
from kbench.verdicts import slowed_reference_message
from kbench.results import Timing


def timed(samples_ms: list[float], others_cpu_ms: list[float] | None = None) -> Timing:
    return Timing(tuple(samples_ms), "cuda-events", tuple(others_cpu_ms or [0.0] * len(samples_ms)))


def samples(rng: random.Random, median: float, spread: float, count: int, outliers: int = 0) -> list[float]:
    """Log-normal times around `median` (spread: sigma of the log), plus a few slow outliers."""
    values = [median * rng.lognormvariate(0, spread) for _ in range(count)]
    return values + [median * rng.uniform(2, 6) for _ in range(outliers)]


def test_the_issue_s_eightfold_slowdown_is_named():
    rng = random.Random(0)
    message = slowed_reference_message(timed(samples(rng, 17.7, 0.01, 8)), timed(samples(rng, 141.0, 0.01, 30)))
    assert message and "8.0" in message and "17.7" in message and "141" in message
    assert "threads" not in message


@pytest.mark.parametrize("ratio, flagged", [(1.3, False), (1.6, False), (1.9, False), (2.1, True), (3.0, True)])
def test_a_tight_gpu_like_sample_is_flagged_from_the_minimum_ratio(ratio, flagged):
    rng = random.Random(1)
    assert (stats.slowdown(samples(rng, 10.0, 0.01, 10), samples(rng, 10.0 * ratio, 0.01, 40)) is not None) is flagged


def test_a_reference_that_moved_to_a_slower_level_by_itself_is_not_slowed():
    """Seen on an H100 (bench/reference_drift.py): the same cuDNN kernels at the same clock took 8.25 ms in
    the alone stretch and 10.7 ms in the rounds of one process, and 12.5 ms in another; tight samples."""
    rng = random.Random(4)
    before = samples(rng, 8.25, 0.01, 4)
    assert stats.slowdown(before, samples(rng, 10.7, 0.01, 30)) is None
    assert stats.slowdown(before, samples(rng, 12.5, 0.01, 30)) is None


def test_noisy_honest_samples_are_never_flagged():
    """Same distribution before and during, wide (30% log sigma) with slow outliers: 500 draws."""
    for seed in range(500):
        rng = random.Random(seed)
        before = samples(rng, 5.0, 0.3, rng.randint(3, 12), outliers=rng.randint(0, 2))
        during = samples(rng, 5.0, 0.3, rng.randint(3, 60), outliers=rng.randint(0, 5))
        assert stats.slowdown(before, during) is None, (seed, before, during)


def test_a_shift_inside_a_wide_spread_is_not_enough():
    """Medians 1.4x apart, but the samples overlap: load, not tampering, can do that."""
    before = [10.0, 11.0, 14.0, 9.0, 16.0, 12.0]
    during = [14.0, 17.0, 12.0, 20.0, 15.0, 18.0]
    assert stats.median(during) / stats.median(before) >= 1.3
    assert stats.slowdown(before, during) is None


def test_too_few_samples_or_a_faster_reference_say_nothing():
    assert stats.slowdown([1.0, 1.0], [8.0, 8.0, 8.0]) is None
    assert stats.slowdown([1.0, 1.0, 1.0], [8.0, 8.0]) is None
    assert stats.slowdown([8.0, 8.1, 7.9], [1.0, 1.1, 0.9]) is None
    assert stats.slowdown([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]) is None
    assert slowed_reference_message(timed([1.0] * 5), timed([1.02] * 5)) is None


def test_a_slowdown_on_some_calls_only_needs_the_median_to_move():
    """Slowing every other call by 8x moves the median only when more than half are slow."""
    rng = random.Random(2)
    before = samples(rng, 10.0, 0.02, 10)
    mostly_slow = samples(rng, 10.0, 0.02, 10) + samples(rng, 80.0, 0.02, 30)
    assert stats.slowdown(before, mostly_slow) is not None



def test_a_launch_bound_reference_slowed_by_the_loop_itself_is_not_a_slowdown():
    """Seen on an H100 with honest candidates: a 0.06 ms reference read 0.175 ms in the rounds (3x, tight
    samples). Under SLOWDOWN_MIN_MS that says nothing; a thread holding the GIL adds milliseconds."""
    rng = random.Random(3)
    before = samples(rng, 0.06, 0.01, 10)
    assert stats.slowdown(before, samples(rng, 0.175, 0.01, 40)) is None
    assert stats.slowdown(before, samples(rng, 10.7, 0.01, 40)) is not None


@pytest.mark.quiet_cpu
def test_the_cpu_other_threads_use_during_a_timed_call_is_recorded():
    """A real thread that spins while the timed call waits (as a thread holding the GIL would while the reference
    runs) shows in the call's sample, and in no sample while it is not running."""
    spinning, stop = threading.Event(), threading.Event()
    spun_s = []  # the spinner's own CPU time, spin by spin: what the machine let it have

    def spin():
        while not stop.is_set():
            if spinning.is_set():
                started = time.thread_time()
                sum(range(10000))
                spun_s.append(time.thread_time() - started)
            else:
                time.sleep(0.001)
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    rule = timing.StopRule(warmup=0, min_samples=3, max_samples=3, target_rse=1.0, budget_s=10.0)
    try:
        quiet, = timing.sample_interleaved([timing.Side(lambda: time.sleep(0.05))], timing.HostTimer(), rule)
        spinning.set()
        busy, = timing.sample_interleaved([timing.Side(lambda: time.sleep(0.05))], timing.HostTimer(), rule)
    finally:
        stop.set()
        thread.join()
    assert len(busy.others_cpu_ms) == 3 and max(quiet.others_cpu_ms) < 10.0, quiet.others_cpu_ms
    # Each timed call left the spinner 50 ms with the GIL free; how much of it a busy machine gave it, its own clock
    # says: the calls' samples hold most of what it spun (the rest fell between the calls).
    assert min(busy.others_cpu_ms) > 10.0, busy.others_cpu_ms
    assert 0.7 * sum(spun_s) * 1e3 < sum(busy.others_cpu_ms) < 1.1 * sum(spun_s) * 1e3 + 5.0, (busy.others_cpu_ms,
                                                                                              sum(spun_s))
