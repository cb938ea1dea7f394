"""Defences against candidates that fake correctness or speed.

Each guard returns the names of the flags it raised; REJECTING flags turn a result into `rejected`.
"""

from __future__ import annotations

import torch

MUTATED_INPUTS = "mutated_inputs"        # a forward call changed its input tensors
CHANGED_SETTINGS = "changed_settings"    # TF32 / cuDNN / matmul precision / default dtype changed

SWEEP_FAILED = "sweep_failed"            # noting: wrong at some random configuration of the problem

REJECTING = (MUTATED_INPUTS, CHANGED_SETTINGS)


def set_strict_precision() -> None:
    """True float32 everywhere: no TF32 in cuDNN or cuBLAS, highest matmul precision."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def snapshot_settings() -> dict:
    """Global numerical settings a candidate could flip to make the reference agree or run slower."""
    matmul = torch.backends.cuda.matmul
    return {
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "matmul.allow_tf32": matmul.allow_tf32,
        "matmul.allow_fp16_reduced_precision_reduction": matmul.allow_fp16_reduced_precision_reduction,
        "matmul.allow_bf16_reduced_precision_reduction": matmul.allow_bf16_reduced_precision_reduction,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def changed_settings(before: dict, after: dict) -> list[str]:
    return [f"{name}: {before[name]} -> {after.get(name)}" for name in before if after.get(name) != before[name]]


def restore_settings(snapshot: dict) -> None:
    """Put the settings back so the reference keeps running under the checking policy."""
    matmul = torch.backends.cuda.matmul
    torch.backends.cudnn.enabled = snapshot["cudnn.enabled"]
    torch.backends.cudnn.allow_tf32 = snapshot["cudnn.allow_tf32"]
    torch.backends.cudnn.benchmark = snapshot["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = snapshot["cudnn.deterministic"]
    matmul.allow_tf32 = snapshot["matmul.allow_tf32"]
    matmul.allow_fp16_reduced_precision_reduction = snapshot["matmul.allow_fp16_reduced_precision_reduction"]
    matmul.allow_bf16_reduced_precision_reduction = snapshot["matmul.allow_bf16_reduced_precision_reduction"]
    torch.set_float32_matmul_precision(snapshot["float32_matmul_precision"])
    torch.set_default_dtype(getattr(torch, snapshot["default_dtype"].removeprefix("torch.")))
    torch.use_deterministic_algorithms(snapshot["deterministic_algorithms"])


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
