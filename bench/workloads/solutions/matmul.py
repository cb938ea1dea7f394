"""Candidate for bench/workloads/problems/matmul.py: the same torch op, so kbench times it as a candidate."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)
