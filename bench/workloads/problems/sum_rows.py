"""Timing-fidelity workload: a reduction, the sum of each row (one memory-bound kernel).

x: (4096, 8192) float32 (134 MB) -> out (4096,). 134 MB read: 28 us at the H200's 4.8 TB/s
peak, expected about 35-40 us of kernel time on an H200 (an estimate; bench/timing_fidelity.py
measures it).
"""
import torch
import torch.nn as nn

rows = 4096
cols = 8192

KBENCH_SMALL = {"rows": 64, "cols": 512}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
