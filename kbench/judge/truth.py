"""Float64 truth: the reference evaluated in float64 (same weights, same inputs). It decides who is wrong when
a candidate and the float32 reference disagree, and measures how precise a candidate is.

The float32 reference is not the truth: where an output is a small difference of large sums its own rounding
can exceed the tolerance, and a candidate more accurate than it would be called incorrect.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from kbench.judge import check
from kbench.failures import one_line
from kbench.loading import lost_context, synchronize


class NoTruth(Exception):
    """The reference cannot run in float64 here (an op without a float64 kernel, memory, ...)."""


def float64_truth(reference_model, inputs: list, device):
    """The reference's output for `inputs`, computed in float64; raises NoTruth where it cannot be."""
    try:
        model = copy.deepcopy(reference_model).double()
        output = model(*[value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value
                         for value in inputs])
        synchronize(device)
    except Exception as error:
        if lost_context(error):
            raise  # the context is broken: nothing after this can run
        raise NoTruth(one_line(error)) from error
    if not any(isinstance(value, torch.Tensor) and value.dtype == torch.float64
               for value in check.as_tensor_list(output)):
        raise NoTruth("the reference has no floating-point output")
    return output


@dataclass(frozen=True)
class Verdict:
    """How a candidate and the float32 reference compare with the float64 truth."""

    candidate_passed: bool         # the candidate is within tolerance of the truth
    candidate_error: float | None  # largest |candidate - truth|
    reference_error: float | None  # largest |float32 reference - truth|
    mismatch: str | None           # why the candidate is not within tolerance of the truth


def judge_by_truth(candidate_output, reference_output, truth, tolerance_for) -> Verdict:
    """Compare the candidate with the truth at the tolerance of the reference's own dtype."""
    as_reference_dtype = [value.to(expected.dtype) if isinstance(value, torch.Tensor) and
                          isinstance(expected, torch.Tensor) else value
                          for value, expected in zip(check.as_tensor_list(truth),
                                                     check.as_tensor_list(reference_output))]
    outcome = check.compare(candidate_output, as_reference_dtype, tolerance_for)
    return Verdict(outcome.passed, largest_error(candidate_output, truth), largest_error(reference_output, truth),
                   outcome.mismatch)


def largest_error(output, truth) -> float | None:
    """Largest |output - truth| over the floating outputs; None when they are not comparable."""
    worst = None
    for got, expected in zip(check.as_tensor_list(output), check.as_tensor_list(truth)):
        if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)) or got.shape != expected.shape:
            return None
        if not got.is_floating_point() or not got.numel():
            continue
        for got64, expected64, _ in check.chunks(got, expected, torch.float64):
            error = float((got64 - expected64).abs().nan_to_num(float("inf")).max())
            worst = error if worst is None else max(worst, error)
    return worst
