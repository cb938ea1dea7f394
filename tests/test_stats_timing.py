"""Statistics and the sampling loop, driven by a fake clock (no GPU, no real time)."""

import math

import pytest

from kbench import stats
from kbench.judge.timing import HostTimer, Side, StopRule, sample_interleaved


def test_median_iqr_rse():
    samples = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert stats.median(samples) == 3.0
    assert stats.iqr(samples) == pytest.approx(2.0)
    assert stats.median_relative_error([5.0]) == math.inf
    assert stats.median_relative_error([2.0, 2.0, 2.0]) == 0.0


def test_the_median_error_ignores_a_few_outliers_and_matches_normal_theory():
    """The stop rule asks how well the reported median is known: a few preempted calls (20x slower) must
    not keep sampling going, as they would with the mean's standard error."""
    import random

    draw = random.Random(0)
    steady = [1.0 + 0.01 * draw.gauss(0, 1) for _ in range(400)]
    with_outliers = steady[:390] + [20.0] * 10
    assert stats.median_relative_error(with_outliers) < 0.001
    mean = sum(with_outliers) / len(with_outliers)
    mean_error = (sum((x - mean) ** 2 for x in with_outliers) / 399) ** 0.5 / 20 / mean
    assert mean_error > 0.05  # the mean's relative standard error would never reach 1%
    # Normal samples: 1.25 sigma / sqrt(n), the median's standard error.
    assert stats.median_relative_error(steady) == pytest.approx(1.2533 * 0.01 / 20, rel=0.3)


def test_speedup_and_geometric_mean():
    assert stats.speedup(10.0, 2.0) == 5.0
    assert stats.speedup(None, 2.0) is None
    assert stats.geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert stats.geometric_mean([]) is None


class FakeClock:
    """A clock that advances only when told: each call 'takes' a known time."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_call(clock, durations_s):
    durations = iter(durations_s)

    def call():
        clock.now += next(durations)
    return call


def test_host_timer_measures_the_call_in_ms():
    clock = FakeClock()
    timer = HostTimer(clock=clock)
    timed_ms, wall_ms, _ = timer.measure(make_call(clock, [0.25]))
    assert timed_ms == pytest.approx(250.0) and wall_ms == timed_ms


def test_sampling_stops_when_precise_and_interleaves():
    clock = FakeClock()
    order = []

    def reference():
        order.append("ref")
        clock.now += 0.002

    def candidate():
        order.append("cand")
        clock.now += 0.001

    rule = StopRule(warmup=2, min_samples=5, max_samples=100, target_rse=0.01, budget_s=100)
    reference_samples, candidate_samples = sample_interleaved([Side(reference), Side(candidate)], HostTimer(clock),
                                                              rule, clock=clock)
    reference_ms, candidate_ms = reference_samples.ms, candidate_samples.ms
    # Constant durations: zero spread, so sampling stops at min_samples.
    assert len(reference_ms) == len(candidate_ms) == 5
    assert reference_ms[0] == pytest.approx(2.0) and candidate_ms[0] == pytest.approx(1.0)
    assert order[:4] == ["ref", "cand", "ref", "cand"]  # warm-up
    # Timed rounds keep the order given (kbench gives the candidate first: fresh.py).
    assert order[4:10] == ["ref", "cand"] * 3
    assert len(order) == 2 * (2 + 5)


def test_sampling_stops_at_budget_with_noisy_samples():
    clock = FakeClock()
    reference = make_call(clock, [0.001, 0.009] * 10_000)
    candidate = make_call(clock, [0.009, 0.001] * 10_000)
    rule = StopRule(warmup=0, min_samples=5, max_samples=10_000, target_rse=1e-6, budget_s=0.5)
    reference_samples, _ = sample_interleaved([Side(reference), Side(candidate)], HostTimer(clock), rule, clock=clock)
    reference_ms = reference_samples.ms
    # Each round costs 10 ms of fake time: the 0.5 s budget allows about 50 rounds.
    assert 45 <= len(reference_ms) <= 55


def test_sampling_takes_a_minimum_even_when_budget_is_spent():
    clock = FakeClock()

    def slow():
        clock.now += 10.0

    rule = StopRule(warmup=0, min_samples=10, max_samples=100, target_rse=0.01, budget_s=0.1)
    reference_samples, candidate_samples = sample_interleaved([Side(slow), Side(slow)], HostTimer(clock), rule,
                                                              clock=clock)
    assert len(reference_samples.ms) == len(candidate_samples.ms) == 3


def test_prepare_and_inspect_run_around_every_call_untimed():
    clock = FakeClock()
    seen = []

    def prepare():
        clock.now += 5.0  # untimed work must not show in the samples
        seen.append("prepare")

    def call():
        clock.now += 0.001
        return "output"

    side = Side(call, prepare=prepare, inspect=lambda output: seen.append(output))
    rule = StopRule(warmup=1, min_samples=3, max_samples=3, target_rse=1.0, budget_s=1e9)
    samples, _ = sample_interleaved([side, Side(call)], HostTimer(clock), rule, clock=clock)
    assert samples.ms == pytest.approx([1.0, 1.0, 1.0])
    assert seen == ["prepare", "output"] * 4


def test_with_two_turns_each_side_runs_two_batches_in_a_row_each_a_sample():
    """Every side follows another side in one of its batches and itself in the other, whatever its place in the
    round; each batch is a sample of its own (the stop rule counts batches, as with one turn), and the turn's
    contents are chosen before each batch."""
    clock = FakeClock()
    order = []
    turn = []

    def side(name, seconds):
        def call():
            order.append((name, turn[-1]))
            clock.now += seconds
        return Side(call)

    rule = StopRule(warmup=1, min_samples=4, max_samples=4, target_rse=1.0, budget_s=1e9)
    candidate, reference = sample_interleaved([side("c", 0.001), side("r", 0.002)], HostTimer(clock), rule,
                                              clock=clock, turns=2, before_turn=turn.append)
    assert order == [("c", 0), ("c", 1), ("r", 0), ("r", 1)] * 3  # a warm-up round and two timed ones
    assert candidate.ms == pytest.approx([1.0] * 4) and reference.ms == pytest.approx([2.0] * 4)


def test_every_side_is_sampled_in_turn_and_all_must_be_precise():
    clock = FakeClock()
    order = []

    def side(name, seconds):
        def call():
            order.append(name)
            clock.now += next(seconds)
        return Side(call)

    steady = iter([0.001] * 1000)
    noisy = iter([0.001, 0.003] * 500)
    rule = StopRule(warmup=0, min_samples=3, max_samples=20, target_rse=0.01, budget_s=1e9)
    samples = sample_interleaved([side("a", steady), side("b", iter([0.002] * 1000)), side("c", noisy)],
                                 HostTimer(clock), rule, clock=clock)
    assert order[:9] == ["a", "b", "c"] * 3
    assert [len(s.ms) for s in samples] == [20, 20, 20]  # the noisy side keeps everyone sampling


def test_the_median_error_reads_the_order_statistics_sqrt_n_over_two_from_the_middle():
    # 1..100: middle 50.5; sqrt(100)/2 = 5 ranks either side: the 45th and 56th values.
    assert stats.median_relative_error([float(value) for value in range(1, 101)]) == \
        pytest.approx((56 - 45) / 2 / 50.5)
