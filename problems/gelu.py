"""KernelBench level 1, problem 26: "26_GELU_".

Computes the exact (erf-based) GELU elementwise: y = x * 0.5 * (1 + erf(x / sqrt(2))).

Official configuration: x (4096, 393216) float32 (1.61e9 elements, 6.4 GB) -> y of the same
shape.  Memory bound: 12.9 GB of traffic, ~3.2 ms at 4 TB/s.

Addition to the KernelBench original: a global `input_range` (official value (0.0, 1.0), which
leaves the original torch.rand input untouched) maps the input to low + (high - low) * rand.
With torch.rand alone every input is non-negative, so a kernel that is wrong for x < 0 would
pass; the sweep also draws ranges covering negative values.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 26
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "26_GELU_"
KBENCH_FAMILY = "gelu"


class Model(nn.Module):
    """y = gelu(x) (exact erf form, PyTorch's default approximate='none')."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)


# Official sizes (KernelBench)
batch_size = 4096
dim = 393216
input_range = (0.0, 1.0)

KBENCH_SWEEP = {
    "batch_size": [1, 3, 17, 256],
    "dim": [1, 5, 1023, 4097, 16411],
    "input_range": [(0.0, 1.0), (-1.0, 1.0), (-6.0, 6.0)],
}
KBENCH_SMALL = {"batch_size": 16, "dim": 65536}


def get_inputs():
    x = torch.rand(batch_size, dim)
    low, high = input_range
    if (low, high) != (0.0, 1.0):
        x.mul_(high - low).add_(low)
    return [x]


def get_init_inputs():
    return []
