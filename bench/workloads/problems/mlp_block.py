"""Timing-fidelity workload: a multi-kernel model, a pre-norm MLP block with a residual.

x: (8192, 1024) float32; LayerNorm -> Linear(1024, 1024) -> GELU -> Linear(1024, 1024) -> + x:
about five kernels per call (layer norm, two GEMMs with bias, GELU, add). The GEMMs are
2 * 2 * 8192 * 1024**2 = 34 GFLOP in strict float32 (about 0.6 ms near 60 TFLOP/s) and the three
elementwise passes move about 67 MB each: expected about 0.7 ms on an H200 (an estimate;
bench/timing_fidelity.py measures it).
"""
import torch
import torch.nn as nn

rows = 8192
features = 1024

KBENCH_SMALL = {"rows": 64, "features": 128}


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        self.up = nn.Linear(features, features)
        self.down = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]
