"""KernelBench level 1, problem 23: "23_Softmax".

Computes a row-wise softmax: y = softmax(x, dim=1) for x of shape (batch_size, dim).

Official configuration: x (4096, 393216) float32 (1.61e9 elements, 6.4 GB) -> y of the same
shape.  Memory bound: >= 12.9 GB of traffic, ~3.2 ms at 4 TB/s (one read + one write).

Addition to the KernelBench original: a global `input_scale` (official value 1.0, which leaves
the original input untouched) multiplies the torch.rand input.  torch.rand alone gives values in
[0, 1), where even a softmax that forgets to subtract the row maximum is accurate; the sweep
also draws scales of 10 and 100 (exp(100) overflows float32) to catch that.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 23
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "23_Softmax"
KBENCH_FAMILY = "softmax"


class Model(nn.Module):
    """y = softmax(x, dim=1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


# Official sizes (KernelBench)
batch_size = 4096
dim = 393216
input_scale = 1.0

KBENCH_SWEEP = {
    "batch_size": [1, 3, 16, 129],
    "dim": [1, 7, 1000, 4099, 32771],
    "input_scale": [1.0, 10.0, 100.0],
}
KBENCH_SMALL = {"batch_size": 16, "dim": 16384}


def get_inputs():
    x = torch.rand(batch_size, dim)
    if input_scale != 1.0:
        x.mul_(input_scale)
    return [x]


def get_init_inputs():
    return []
