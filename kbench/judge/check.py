"""Correctness: compare a candidate's outputs with the reference's, trial by trial."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from kbench.results import CheckResult


@dataclass(frozen=True)
class TrialOutcome:
    passed: bool
    max_abs_err: float | None
    max_rel_err: float | None
    norm_err: float | None
    mismatch: str | None     # why the trial failed, readable; None when it passed


def as_tensor_list(output) -> list:
    """A model's output as a list: a tensor, or a tuple/list of tensors (other values kept as is)."""
    if isinstance(output, (tuple, list)):
        return list(output)
    return [output]


def compare(candidate_output, reference_output,
            tolerance_for: Callable[[str], tuple[float, float]]) -> TrialOutcome:
    """Compare outputs: count, type, shape and dtype, non-finite values, then allclose."""
    candidates = as_tensor_list(candidate_output)
    references = as_tensor_list(reference_output)
    if len(candidates) != len(references):
        return _failed(f"returned {len(candidates)} outputs, expected {len(references)}")
    worst = (0.0, 0.0, 0.0)
    for index, (got, expected) in enumerate(zip(candidates, references)):
        label = f"output {index}" if len(references) > 1 else "output"
        if not isinstance(expected, torch.Tensor):
            expected = torch.as_tensor(expected)
        if type(got) is not torch.Tensor and not isinstance(got, torch.nn.Parameter):
            return _failed(f"{label} is a {type(got).__name__}, expected a torch.Tensor")
        if got.shape != expected.shape:
            return _failed(f"{label} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
        if got.dtype != expected.dtype:
            return _failed(f"{label} has dtype {got.dtype}, expected {expected.dtype}")
        if got.device != expected.device:
            return _failed(f"{label} is on {got.device}, expected {expected.device}")
        outcome = _compare_tensor(got, expected, *tolerance_for(str(expected.dtype).removeprefix("torch.")),
                                  label)
        if not outcome.passed:
            return outcome
        worst = tuple(max(a, b) for a, b in zip(worst, (outcome.max_abs_err, outcome.max_rel_err,
                                                          outcome.norm_err)))
    return TrialOutcome(True, *worst, mismatch=None)


def within_tolerance(candidate_output, reference_output,
                     tolerance_for: Callable[[str], tuple[float, float]]) -> bool:
    """A fast pass that never passes what compare() would fail: the same structure, and every element within
    99.9% of its tolerance, computed in float32 (float64 for float64 outputs) without the error statistics,
    reading the device once. False means only: ask compare(). For the timing loop's output checks."""
    candidates, references = as_tensor_list(candidate_output), as_tensor_list(reference_output)
    if len(candidates) != len(references):
        return False
    equal, within = [], []  # host booleans; 0-d device booleans, read together at the end
    for got, expected in zip(candidates, references):
        if not (type(got) is torch.Tensor and type(expected) is torch.Tensor) or got.shape != expected.shape \
                or got.dtype != expected.dtype or got.device != expected.device:
            return False
        if not expected.is_floating_point():
            equal.append(torch.equal(got, expected))
            continue
        atol, rtol = tolerance_for(str(expected.dtype).removeprefix("torch."))
        wide = torch.float64 if expected.dtype == torch.float64 else torch.float32
        for got_chunk, expected_chunk, _ in chunks(got, expected, wide):
            # The tolerance rule at 99.9% of both tolerances, one max per chunk. A NaN or an infinity on either
            # side makes the max NaN or positive, which fails (compare() then decides how they match).
            difference = (got_chunk - expected_chunk).abs_()
            excess = tolerance_excess(difference, expected_chunk.abs(), 0.999 * atol, 0.999 * rtol)
            within.append(excess.max() <= 0)
    if not all(equal):
        return False
    return not within or all(torch.stack([verdict.to(within[0].device) for verdict in within]).tolist())


# Elements compared at a time: the float64 temporaries of one chunk take about 1 GB whatever the output's
# size (a whole 8.6 GB float32 output compared at once would need ~85 GB of them).
COMPARE_CHUNK_ELEMENTS = 1 << 24


class _Tally:
    """What the chunks of one output found so far, kept on the output's device: the chunks queue without
    waiting for each other, and the host reads the whole tally once (a read per chunk and statistic made a
    2 GB output's comparison take a tenth of a second of synchronisations)."""

    def __init__(self, device):
        zero = torch.zeros((), dtype=torch.float64, device=device)
        self.max_abs = self.max_rel = self.reference_square_sum = self.difference_square_sum = zero
        self.nonfinite = _Found(device)   # non-finite mismatches
        self.outside = _Found(device)     # elements outside tolerance

    def read(self) -> tuple[float, float, float, float, tuple[int, int] | None, tuple[int, int] | None]:
        values = torch.stack([self.max_abs, self.max_rel, self.reference_square_sum, self.difference_square_sum,
                              *self.nonfinite.values(), *self.outside.values()]).tolist()
        return (*values[:4], _Found.of(values[4:6]), _Found.of(values[6:8]))


class _Found:
    """How many elements of a flat mask are set, and the flat index of the first, over chunks, on the device."""

    def __init__(self, device):
        self.count = torch.zeros((), dtype=torch.float64, device=device)
        self.first = torch.zeros((), dtype=torch.float64, device=device)

    def add(self, mask: torch.Tensor, offset: int) -> None:
        count = mask.sum(dtype=torch.float64)
        first = mask.view(torch.uint8).argmax().to(torch.float64) + offset  # the first set element, if any
        self.first = torch.where(self.count > 0, self.first, first)
        self.count = self.count + count

    def values(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.count, self.first

    @staticmethod
    def of(values: list[float]) -> tuple[int, int] | None:
        """(how many, first flat index), or None when there are none."""
        count, first = values
        return (int(count), int(first)) if count else None


def _compare_tensor(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
                    label: str) -> TrialOutcome:
    if expected.numel() == 0:
        return TrialOutcome(True, 0.0, 0.0, 0.0, None)
    if expected.is_complex() or not (expected.is_floating_point()):
        differs = _Found(expected.device)
        differs.add(got.detach().reshape(-1) != expected.detach().reshape(-1), 0)
        mismatched = _Found.of(torch.stack(differs.values()).tolist())
        if mismatched:
            return _failed(_where(mismatched, got, expected, label, "differs"))
        return TrialOutcome(True, 0.0, 0.0, 0.0, None)
    passed = _finite_and_within(got, expected, atol, rtol)
    if passed is not None:
        return passed
    tally = _Tally(expected.device)
    for got64, expected64, start in chunks(got, expected, torch.float64):
        _compare_chunk(got64, expected64, atol, rtol, start, tally)
    max_abs, max_rel, reference_square_sum, difference_square_sum, nonfinite, outside = tally.read()
    errors = _errors(max_abs, max_rel, reference_square_sum, difference_square_sum)
    if nonfinite:
        return TrialOutcome(False, *errors, _where(nonfinite, got, expected, label, "non-finite mismatch"))
    if outside:
        return TrialOutcome(False, *errors, _where(outside, got, expected, label,
                                                   f"outside atol={atol:g} rtol={rtol:g}"))
    return TrialOutcome(True, *errors, None)


def chunks(got: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype | None = None):
    """(got, expected, flat index of the first element) for each COMPARE_CHUNK_ELEMENTS-long run of the
    flattened tensors, in `dtype` where given (a chunk already of that dtype is a view, not a copy): every loop
    that compares or measures two outputs walks them with this, so none holds temporaries of a whole output."""
    flat_got, flat_expected = got.detach().reshape(-1), expected.detach().reshape(-1)
    for start in range(0, flat_expected.numel(), COMPARE_CHUNK_ELEMENTS):
        chunk = slice(start, start + COMPARE_CHUNK_ELEMENTS)
        got_chunk, expected_chunk = flat_got[chunk], flat_expected[chunk]
        if dtype is not None:
            got_chunk, expected_chunk = got_chunk.to(dtype), expected_chunk.to(dtype)
        yield got_chunk, expected_chunk, start


def tolerance_excess(difference, magnitude, atol: float, rtol: float):
    """How far |got - expected| (`difference`) lies beyond the tolerance atol + rtol |expected| (`magnitude`):
    positive where an element is outside it. The one place the tolerance rule is written; tensors or floats.
    Where a difference is NaN, or an infinity meets an infinite bound, the excess is NaN, which is neither
    positive nor at most zero: compare() settles non-finite values before asking it, and within_tolerance
    fails on them. The sign is exactly that of difference - bound (IEEE subtraction rounds no nonzero
    difference to zero), so `excess > 0` is `difference > bound` to the bit."""
    return difference - (atol + rtol * magnitude)


def _finite_and_within(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> TrialOutcome | None:
    """The passing outcome, with the same error numbers _compare_chunk's tally gives, where every element of both
    is finite and within tolerance; else None (the full comparison then says what failed, and where). It launches
    a third of the full comparison's kernels: where all is finite, the non-finite cases have nothing to find, and
    a failure's place is not asked for. A non-finite element anywhere makes the largest difference non-finite,
    which sends it on."""
    device = expected.device
    zero = torch.zeros((), dtype=torch.float64, device=device)
    max_abs = max_rel = reference_square_sum = difference_square_sum = outside = zero
    for got64, expected64, _ in chunks(got, expected, torch.float64):
        diff = torch.sub(got64, expected64).abs_()
        magnitude = expected64.abs()
        max_abs = torch.maximum(max_abs, diff.max())
        relative = diff / magnitude.clamp_min(1e-30)
        relative.masked_fill_(magnitude < max(atol, 1e-30), 0.0)
        max_rel = torch.maximum(max_rel, relative.max())
        reference_square_sum = reference_square_sum + expected64.square().sum()
        difference_square_sum = difference_square_sum + diff.square().sum()
        outside = outside + (tolerance_excess(diff, magnitude, atol, rtol) > 0).sum(dtype=torch.float64)
    max_abs, max_rel, reference_square_sum, difference_square_sum, outside = torch.stack(
        [max_abs, max_rel, reference_square_sum, difference_square_sum, outside]).tolist()
    if not math.isfinite(max_abs) or outside:
        return None
    return TrialOutcome(True, *_errors(max_abs, max_rel, reference_square_sum, difference_square_sum), None)


def _errors(max_abs: float, max_rel: float, reference_square_sum: float,
            difference_square_sum: float) -> tuple[float, float, float]:
    """(max_abs, max_rel, norm_err) from an output's folded statistics: norm_err is ||got - expected|| over
    ||expected||, or the difference's norm alone where the reference is all zeros."""
    reference_norm, difference_norm = math.sqrt(reference_square_sum), math.sqrt(difference_square_sum)
    return max_abs, max_rel, difference_norm / reference_norm if reference_norm > 0 else difference_norm


def _compare_chunk(got64: torch.Tensor, expected64: torch.Tensor, atol: float, rtol: float, offset: int,
                   tally: _Tally) -> None:
    """Fold one chunk (flat, in float64, starting at flat index `offset`) into the tally."""
    # Non-finite values: the candidate must be finite where the reference is, and match it elsewhere.
    expected_finite = torch.isfinite(expected64)
    bad_nonfinite = (expected_finite & ~torch.isfinite(got64)) | (~expected_finite & (got64 != expected64)
                                                                  & ~(got64.isnan() & expected64.isnan()))
    diff = torch.where(expected_finite, (got64 - expected64).abs(), 0.0)
    diff = torch.nan_to_num(diff, nan=float("inf"))
    tally.max_abs = torch.maximum(tally.max_abs, diff.max())
    significant = expected_finite & (expected64.abs() >= max(atol, 1e-30))
    relative = torch.where(significant, diff / expected64.abs().clamp_min(1e-30), 0.0)
    tally.max_rel = torch.maximum(tally.max_rel, relative.max())
    finite_reference = torch.where(expected_finite, expected64, 0.0)
    tally.reference_square_sum = tally.reference_square_sum + finite_reference.square().sum()
    tally.difference_square_sum = tally.difference_square_sum + diff.square().sum()
    tally.nonfinite.add(bad_nonfinite, offset)
    tally.outside.add(tolerance_excess(diff, expected64.abs(), atol, rtol) > 0, offset)


def _where(found: tuple[int, int], got: torch.Tensor, expected: torch.Tensor, label: str, what: str) -> str:
    count, flat_index = found
    position = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), expected.shape))
    got_value = got.reshape(-1)[flat_index].item()
    expected_value = expected.reshape(-1)[flat_index].item()
    return (f"{label}[{', '.join(map(str, position))}] = {got_value:.6g}, expected {expected_value:.6g} "
            f"({what}; {count} of {expected.numel()} elements)")


def _failed(message: str) -> TrialOutcome:
    return TrialOutcome(False, None, None, None, message)


def summarise(outcomes: list[TrialOutcome]) -> CheckResult:
    """Fold trials into one CheckResult: worst errors, first failing trial's mismatch."""
    def worst(values):
        present = [v for v in values if v is not None]
        return max(present) if present else None

    first_failure = next(((i, o) for i, o in enumerate(outcomes) if not o.passed), None)
    return CheckResult(
        trials_passed=sum(o.passed for o in outcomes),
        trials_total=len(outcomes),
        max_abs_err=worst(o.max_abs_err for o in outcomes),
        max_rel_err=worst(o.max_rel_err for o in outcomes),
        norm_err=worst(o.norm_err for o in outcomes),
        first_mismatch=(f"trial {first_failure[0]}: {first_failure[1].mismatch}" if first_failure else None),
    )


def error_against(output, truth) -> float | None:
    """Largest ||output - truth|| / ||truth|| over floating outputs (truth in float64); None if not comparable."""
    outputs, truths = as_tensor_list(output), as_tensor_list(truth)
    worst = None
    for got, expected in zip(outputs, truths):
        if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)) or got.shape != expected.shape:
            return None
        if not got.is_floating_point():
            continue
        sums = torch.zeros(2, dtype=torch.float64, device=expected.device)  # read once, after every chunk
        for got64, expected64, _ in chunks(got, expected, torch.float64):
            sums = sums + torch.stack([(got64 - expected64).square().sum(), expected64.square().sum()])
        difference, scale = (math.sqrt(value) for value in sums.tolist())
        error = difference / scale if scale > 0 else difference
        worst = error if worst is None else max(worst, error)
    return worst
