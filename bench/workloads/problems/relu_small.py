"""Timing-fidelity workload: elementwise ReLU on a small tensor (one kernel, launch-bound).

x: 2**20 float32 (4.2 MB) -> out of the same size. 8.4 MB of traffic takes under 2 us at the
H200's 4.8 TB/s, so launch and ramp-up dominate: expected about 5 us of kernel time on an H200
(an estimate; bench/timing_fidelity.py measures it).
"""
import torch
import torch.nn as nn

numel = 1 << 20

KBENCH_SMALL = {"numel": 1 << 14}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(numel)]


def get_init_inputs():
    return []
