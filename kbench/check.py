"""Correctness: compare a candidate's outputs with the reference's, trial by trial."""

from __future__ import annotations

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


def _compare_tensor(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
                    label: str) -> TrialOutcome:
    if expected.numel() == 0:
        return TrialOutcome(True, 0.0, 0.0, 0.0, None)
    if expected.is_complex() or not (expected.is_floating_point()):
        mismatched = got != expected
        if bool(mismatched.any()):
            return _failed(_where(mismatched, got, expected, label, "differs"))
        return TrialOutcome(True, 0.0, 0.0, 0.0, None)
    got64 = got.detach().to(torch.float64)
    expected64 = expected.detach().to(torch.float64)
    # Non-finite values: the candidate must be finite where the reference is, and match it elsewhere.
    expected_finite = torch.isfinite(expected64)
    bad_nonfinite = (expected_finite & ~torch.isfinite(got64)) | (~expected_finite & (got64 != expected64)
                                                                  & ~(got64.isnan() & expected64.isnan()))
    diff = torch.where(expected_finite, (got64 - expected64).abs(), torch.zeros_like(got64))
    diff = torch.nan_to_num(diff, nan=float("inf"))
    max_abs = float(diff.max())
    significant = expected_finite & (expected64.abs() >= max(atol, 1e-30))
    relative = torch.where(significant, diff / expected64.abs().clamp_min(1e-30), torch.zeros_like(diff))
    max_rel = float(relative.max())
    reference_norm = float(torch.linalg.vector_norm(torch.where(expected_finite, expected64, 0.0)))
    difference_norm = float(torch.linalg.vector_norm(torch.where(expected_finite, diff, 0.0)))
    norm_err = difference_norm / reference_norm if reference_norm > 0 else difference_norm
    if bool(bad_nonfinite.any()):
        return TrialOutcome(False, max_abs, max_rel, norm_err,
                            _where(bad_nonfinite, got, expected, label, "non-finite mismatch"))
    outside = diff > atol + rtol * expected64.abs()
    if bool(outside.any()):
        return TrialOutcome(False, max_abs, max_rel, norm_err,
                            _where(outside, got, expected, label, f"outside atol={atol:g} rtol={rtol:g}"))
    return TrialOutcome(True, max_abs, max_rel, norm_err, None)


def _where(mask: torch.Tensor, got: torch.Tensor, expected: torch.Tensor, label: str, what: str) -> str:
    count = int(mask.sum())
    flat_index = int(mask.reshape(-1).nonzero()[0, 0])
    position = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), mask.shape))
    got_value = got.reshape(-1)[flat_index].item()
    expected_value = expected.reshape(-1)[flat_index].item()
    return (f"{label}[{', '.join(map(str, position))}] = {got_value:.6g}, expected {expected_value:.6g} "
            f"({what}; {count} of {mask.numel()} elements)")


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
        expected64 = expected.detach().to(torch.float64)
        difference = float(torch.linalg.vector_norm(got.detach().to(torch.float64) - expected64))
        scale = float(torch.linalg.vector_norm(expected64))
        error = difference / scale if scale > 0 else difference
        worst = error if worst is None else max(worst, error)
    return worst
