"""Timing-fidelity workload: elementwise ReLU on a medium tensor (one memory-bound kernel).

x: 2**23 float32 (33.6 MB) -> out of the same size. 67 MB of traffic: 14 us at the H200's
4.8 TB/s peak, expected about 20 us of kernel time on an H200 (an estimate; bench/timing_fidelity.py
measures it).
"""
import torch
import torch.nn as nn

numel = 1 << 23

KBENCH_SMALL = {"numel": 1 << 14}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(numel)]


def get_init_inputs():
    return []
