"""Swish in plain PyTorch: torch.nn.functional.silu is the same function, as one fused op.
Expected verdict: correct (no extension to build, so it also runs where there is no compiler)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x)
