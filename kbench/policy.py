"""Precision policies and the global numerical settings they fix, in one table.

Each setting is a name with a getter and a setter. The judge applies the policy before it runs the reference
(and puts it back after a baseline changed it); the runner applies it before it imports the candidate, whose
process is its own to change after that.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from kbench.config import PYTORCH_DEFAULT


class Setting(NamedTuple):
    read: Callable[[], object]
    write: Callable[[object], None]


def _attribute(owner, name: str) -> Setting:
    return Setting(lambda: getattr(owner, name), lambda value: setattr(owner, name, value))


def _dtype_from_name(name: str) -> torch.dtype:
    return getattr(torch, name.removeprefix("torch."))


_matmul = torch.backends.cuda.matmul
SETTINGS: dict[str, Setting] = {
    "cudnn.enabled": _attribute(torch.backends.cudnn, "enabled"),
    "cudnn.allow_tf32": _attribute(torch.backends.cudnn, "allow_tf32"),
    "cudnn.benchmark": _attribute(torch.backends.cudnn, "benchmark"),
    "cudnn.deterministic": _attribute(torch.backends.cudnn, "deterministic"),
    "matmul.allow_tf32": _attribute(_matmul, "allow_tf32"),
    "matmul.allow_fp16_reduced_precision_reduction": _attribute(_matmul, "allow_fp16_reduced_precision_reduction"),
    "matmul.allow_bf16_reduced_precision_reduction": _attribute(_matmul, "allow_bf16_reduced_precision_reduction"),
    "float32_matmul_precision": Setting(torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "default_dtype": Setting(lambda: str(torch.get_default_dtype()),
                             lambda name: torch.set_default_dtype(_dtype_from_name(name))),
    "deterministic_algorithms": Setting(torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
}

# The settings each policy fixes (the others stay as they are). Strict: true float32 everywhere, no TF32
# in cuDNN or cuBLAS. PyTorch's defaults: TF32 allowed in cuDNN convolutions, not in matmul.
STRICT_SETTINGS = {"cudnn.allow_tf32": False, "matmul.allow_tf32": False, "float32_matmul_precision": "highest"}
PYTORCH_DEFAULT_SETTINGS = {"cudnn.allow_tf32": True, "matmul.allow_tf32": False, "float32_matmul_precision": "highest"}


def apply(values: dict) -> None:
    for name, value in values.items():
        SETTINGS[name].write(value)


def apply_policy(policy: str) -> None:
    """The settings of a precision policy (see config.POLICIES)."""
    apply(PYTORCH_DEFAULT_SETTINGS if policy == PYTORCH_DEFAULT else STRICT_SETTINGS)


def set_pytorch_default_precision() -> None:
    apply(PYTORCH_DEFAULT_SETTINGS)
