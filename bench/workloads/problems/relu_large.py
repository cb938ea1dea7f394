"""Timing-fidelity workload: elementwise ReLU on a large tensor (one memory-bound kernel).

x: 2**28 float32 (1.07 GB) -> out of the same size. 2.15 GB of traffic: 0.45 ms at the H200's
4.8 TB/s peak, expected about 0.55 ms of kernel time on an H200 (an estimate;
bench/timing_fidelity.py measures it).
"""
import torch
import torch.nn as nn

numel = 1 << 28

KBENCH_SMALL = {"numel": 1 << 14}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(numel)]


def get_init_inputs():
    return []
