"""Timing-fidelity workload: softmax over the last dimension (one memory-bound kernel).

x: (4096, 8192) float32 (134 MB) -> out of the same size. 268 MB of traffic: 56 us at the H200's
4.8 TB/s peak, expected about 70 us of kernel time on an H200 (an estimate;
bench/timing_fidelity.py measures it).
"""
import torch
import torch.nn as nn

rows = 4096
cols = 8192

KBENCH_SMALL = {"rows": 64, "cols": 512}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
