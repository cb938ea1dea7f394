"""Candidate for bench/workloads/problems/relu_small.py: the same torch op, so kbench times it as a candidate."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
