"""Quick-start problem: Swish, y = x * sigmoid(x), at a size a laptop runs in milliseconds.

KernelBench level 1 #25 (25_Swish.py) is the same model at 4096 x 393216 (6.4 GB); here the
official size is 16 x 16384 (1 MB), so a CPU evaluates it as it is (no reduced sizes).
"""
import torch
import torch.nn as nn

KBENCH_FAMILY = "activation"


class Model(nn.Module):
    """Swish activation: two PyTorch ops, sigmoid then multiply."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
