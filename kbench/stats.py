"""Pure statistics over timing samples: no torch, no clocks."""

from __future__ import annotations

import math
import statistics
from typing import Sequence


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def iqr(samples: Sequence[float]) -> float:
    """Interquartile range (the spread kbench reports next to a median)."""
    if len(samples) < 2:
        return 0.0
    quartiles = statistics.quantiles(samples, n=4, method="inclusive")
    return quartiles[2] - quartiles[0]


def median_relative_error(samples: Sequence[float]) -> float:
    """Standard error of the median over the median, distribution-free: half the distance between the
    order statistics one standard deviation of the median's rank either side of the middle (n/2 +- sqrt(n)/2).
    For normal samples this is 1.25 sigma / sqrt(n), the median's standard error; unlike the mean's, a few
    slow outliers (a preempted call) do not inflate it. Infinite until there are two samples."""
    if len(samples) < 2:
        return math.inf
    ordered = sorted(samples)
    count = len(ordered)
    middle = statistics.median(ordered)
    if middle <= 0:
        return math.inf
    reach = math.sqrt(count) / 2
    lower = ordered[max(0, math.floor((count - 1) / 2 - reach))]
    upper = ordered[min(count - 1, math.ceil((count - 1) / 2 + reach))]
    return (upper - lower) / 2 / middle


def largest_drop(values: Sequence[float]) -> float:
    """Largest fall from a value to any later one, as a fraction of the earlier value (0 if none)."""
    drop, highest = 0.0, 0.0
    for value in values:
        highest = max(highest, value)
        if highest > 0:
            drop = max(drop, (highest - value) / highest)
    return drop


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean: how much repeated measurements spread (None for fewer
    than two values or a zero mean)."""
    if len(values) < 2 or statistics.fmean(values) == 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def finite_number(value) -> float | None:
    """`value` as a float (a CSV cell, a JSON field), None when it is missing, not a number or NaN."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def speedup(reference_ms: float | None, candidate_ms: float | None) -> float | None:
    if not reference_ms or not candidate_ms:
        return None
    return reference_ms / candidate_ms


def geometric_mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(statistics.fmean(math.log(v) for v in positive))


# Fewer samples than this on either side say nothing about a slowdown.
MIN_SLOWDOWN_SAMPLES = 3
# The reference counts as slowed once its median time grew by this factor or more... A GPU-bound reference's
# own time can move between levels that last seconds, running the same kernels at the same clock (cuDNN's FFT
# transposed convolutions do: bench/reference_drift.py; figures in docs/benchmarks.md), so a smaller factor would
# blame candidates for the reference's own moods.
SLOWDOWN_MIN_RATIO = 2.0
# ...and the medians moved apart by this many times the two samples' interquartile ranges together...
SLOWDOWN_SEPARATION = 2.0
# ...and by this many milliseconds at least. A reference of tens of microseconds is bound by the host's launch
# path, which the work between the rounds' calls slows by itself, by more than SLOWDOWN_MIN_RATIO with honest
# candidates (docs/benchmarks.md), while a thread holding the GIL, the way to slow the reference from outside
# it, adds milliseconds.
SLOWDOWN_MIN_MS = 0.25


def slowdown(before: Sequence[float], during: Sequence[float], min_ratio: float = SLOWDOWN_MIN_RATIO,
             separation: float = SLOWDOWN_SEPARATION) -> float | None:
    """median(during) / median(before) when `during` is slower than `before` beyond noise, else None.

    All of these must hold: at least MIN_SLOWDOWN_SAMPLES samples on each side; the median grew by
    `min_ratio` or more (a real but small shift, from load or clocks, is not enough); the medians
    moved apart by at least `separation` times the sum of the two interquartile ranges, so a wide,
    noisy sample needs a proportionally larger shift (and the two middle halves cannot overlap); and
    by SLOWDOWN_MIN_MS at least (on a launch-bound reference a shift below it is the loop's own work).
    """
    if min(len(before), len(during)) < MIN_SLOWDOWN_SAMPLES:
        return None
    before_median, during_median = median(before), median(during)
    if before_median <= 0 or during_median < min_ratio * before_median:
        return None
    if during_median - before_median < max(separation * (iqr(before) + iqr(during)), SLOWDOWN_MIN_MS):
        return None
    return during_median / before_median

