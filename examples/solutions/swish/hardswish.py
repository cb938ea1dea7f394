"""A plausible mistake: hardswish is a piecewise approximation of swish, not the same function.
Expected verdict: incorrect (kbench says where and by how much)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardswish(x)
