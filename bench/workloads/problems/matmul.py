"""Timing-fidelity workload: a square float32 matmul (one compute-bound kernel).

a, b: (4096, 4096) float32 -> a @ b. 2 * 4096**3 = 137 GFLOP; kbench times in strict float32 (no
TF32), where the H200 peaks near 60 TFLOP/s: expected about 2.5-3 ms on an H200 (an estimate;
bench/timing_fidelity.py measures it).
"""
import torch
import torch.nn as nn

n = 4096

KBENCH_SMALL = {"n": 64}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
