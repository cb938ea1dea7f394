"""KernelBench level 1, problem 47: "47_Sum_reduction_over_a_dimension".

Computes torch.sum(x, dim=reduce_dim, keepdim=True) for a 3-D float32 tensor.

Official configuration: x (128, 4096, 4095) (2.147e9 elements, just under 2^31; 8.6 GB),
reduce_dim 1 -> y (128, 1, 4095).  Memory bound: ~8.6 GB read, ~2.1 ms at 4 TB/s.
The sweep reduces over every dimension (including -1) with odd sizes.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 47
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "47_Sum_reduction_over_a_dimension"
KBENCH_FAMILY = "sum_reduction"


class Model(nn.Module):
    """y = x.sum(dim, keepdim=True)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


# Official sizes (KernelBench)
batch_size = 128
dim1 = 4096
dim2 = 4095
reduce_dim = 1

KBENCH_SWEEP = {
    "batch_size": [1, 2, 4],
    "dim1": [1, 7, 256, 1031],
    "dim2": [1, 3, 128, 1025],
    "reduce_dim": [0, 1, 2, -1],
}
KBENCH_SMALL = {"batch_size": 8, "dim1": 512, "dim2": 511}


def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
