"""KernelBench level 1, problem 9: "9_Tall_skinny_matrix_multiplication_".

Computes C = A @ B where A is tall and skinny (M x N, M >> N) and B is short and wide (N x M),
so the output is a large M x M matrix built from rank-N inner products (K = N = 32).

Official configuration: A (32768, 32), B (32, 32768) -> C (32768, 32768).
2 * 32768^2 * 32 = 68.7 GFLOP (~1.4 ms at 50 TFLOP/s fp32) and a 4.3 GB output write
(~1.1 ms at 4 TB/s): roughly 1.4-2.5 ms on an H200, bound by compute and the output store.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 9
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "9_Tall_skinny_matrix_multiplication_"
KBENCH_FAMILY = "matmul"


class Model(nn.Module):
    """C = A @ B with A (M, N) and B (N, M)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# Official sizes (KernelBench)
M = 16384 * 2
N = 16 * 2

KBENCH_SWEEP = {
    "M": [1, 17, 128, 257, 1000, 2048],
    "N": [1, 3, 16, 33, 64],
}
KBENCH_SMALL = {"M": 1024}


def get_inputs():
    return [torch.rand(M, N), torch.rand(N, M)]


def get_init_inputs():
    return []
