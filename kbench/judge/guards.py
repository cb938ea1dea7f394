"""Defences against candidates that fake correctness or speed: each check returns what it found; the
flags it raises are named in flags.py.
"""

from __future__ import annotations

from typing import Callable

import torch

from kbench.judge import check

# A fall of the SM clock beyond this fraction while timing makes the times suspect.
THROTTLE_DROP = 0.10


def throttle_message(clocks) -> str | None:
    """A warning when the SM clock fell by more than THROTTLE_DROP while timing (results.ClockRecord)."""
    if clocks is None or clocks.sm_drop is None or clocks.sm_drop <= THROTTLE_DROP:
        return None
    temperatures = "" if clocks.temperature_c_end is None else \
        f", temperature {clocks.temperature_c_start:g} -> {clocks.temperature_c_end:g} C"
    return (f"SM clock fell {clocks.sm_drop:.0%} while timing ({clocks.sm_mhz_start:g} MHz at the start, "
            f"{clocks.sm_mhz_min:g} lowest{temperatures}): times may be slow")


def inputs_mutated(pristine: list, used: list) -> bool:
    """True when any input tensor differs from its untouched copy (NaN equal to NaN)."""
    for original, after in zip(pristine, used):
        if isinstance(original, torch.Tensor):
            if not isinstance(after, torch.Tensor) or original.shape != after.shape:
                return True
            if not torch.equal(original, after) and not bool(
                    torch.isclose(original, after, rtol=0, atol=0, equal_nan=True).all()
                    if original.is_floating_point() else False):
                return True
    return False


# --- outputs -----------------------------------------------------------------------------------

def poison(output) -> None:
    """Fill floating outputs with NaN before they are freed: memory a later candidate reuses without
    writing then reads NaN, not the reference's answer."""
    values = output if isinstance(output, (tuple, list)) else [output]
    for value in values:
        if type(value) is torch.Tensor and value.is_floating_point():
            value.detach().fill_(float("nan"))
            if value.is_cuda:
                # Finished here, so the fill is not in the wall time of whatever is timed next.
                torch.cuda.synchronize(value.device)


def weak_check_reason(reference_output, tolerance_for: Callable[[str], tuple[float, float]]) -> str | None:
    """Why the tolerance says little about this reference output (nearly zero or nearly constant)."""
    values = reference_output if isinstance(reference_output, (tuple, list)) else [reference_output]
    for index, value in enumerate(values):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() < 2:
            continue
        atol, rtol = tolerance_for(str(value.dtype).removeprefix("torch."))
        finite = torch.isfinite(value)
        # One read of the device for the four figures; the extremes are exact in the output's dtype.
        count, largest, highest, lowest = torch.stack([
            finite.sum(dtype=torch.float64), torch.where(finite, value.abs(), 0).max().double(),
            torch.where(finite, value, -torch.inf).max().double(),
            torch.where(finite, value, torch.inf).min().double()]).tolist()
        if count < 2:
            continue
        spread = highest - lowest
        if largest <= atol:
            return f"reference output {index} is nearly zero (max |ref| = {largest:.2g} <= atol)"
        if check.tolerance_excess(spread, largest, atol, rtol) <= 0:
            return f"reference output {index} is nearly constant (spread {spread:.2g} within tolerance)"
    return None


# A candidate's error against float64 truth this many times the float32 reference's is lower precision.
LOW_PRECISION_RATIO = 10.0
# ...and only when that error is large enough to matter at all.
LOW_PRECISION_MIN_ERROR = 1e-6


def low_precision_possible(norm_err: float | None) -> bool:
    """Whether a candidate whose relative norm error against the float32 reference is `norm_err` can be
    flagged at all: against the truth its error is at most norm_err*(1 + e) + e, e being the reference's
    own, and the flag needs e at most a tenth of it, so it is at most about norm_err / 0.9. Below the
    flag's floor, the float64 truth (the slowest part of the checks on large convolutions) need not run."""
    if norm_err is None or norm_err != norm_err:
        return True
    ratio = LOW_PRECISION_RATIO
    bound = norm_err / max(1 - 1 / ratio - norm_err / ratio, 1e-9)
    return bound * 1.01 >= LOW_PRECISION_MIN_ERROR


# --- which aten ops ran ------------------------------------------------------------------------

# Ops that move, allocate or reshape data: calling them is not doing the reference's work.
UTILITY_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill_", "zero_", "view",
    "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "contiguous", "clone", "copy_", "_to_copy",
    "to", "detach", "alias", "as_strided", "select", "slice", "squeeze", "unsqueeze", "unbind", "split",
    "lift_fresh", "resize_", "set_", "_reshape_alias", "view_as", "flatten", "unflatten", "narrow", "split_with_sizes",
    "is_same_size", "_local_scalar_dense", "item", "scalar_tensor", "arange", "record_stream", "cat", "stack",
    # seen by the profiler around the ones above (they call them, or are called for them)
    "lift_fresh_copy", "resolve_conj", "resolve_neg", "result_type", "expand_as", "reshape_as", "chunk",
    "tensor_split", "_has_compatible_shallow_copy_type", "_nested_tensor_from_mask_left_aligned", "clamp_min_",
    "is_nonzero", "numel", "size", "stride", "dim", "type_as", "new_tensor", "as_strided_", "zero_",
}


def shared_work_ops(reference_ops: set[str], candidate_ops: set[str]) -> list[str]:
    """The reference's work-carrying ops that the candidate ran too."""
    return sorted((reference_ops & candidate_ops) - UTILITY_OPS)
