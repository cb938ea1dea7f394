"""KernelBench level 1, problem 1: "1_Square_matrix_multiplication_".

Computes C = A @ B for two square float32 matrices.

Official configuration: A, B (4096, 4096) -> C (4096, 4096).
2 * 4096^3 = 137 GFLOP (~2.7 ms at 50 TFLOP/s fp32); 3 x 67 MB of operands.
The sweep uses odd, prime and tiny N so kernels cannot assume N is a multiple of a tile size.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 1
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "1_Square_matrix_multiplication_"
KBENCH_FAMILY = "matmul"


class Model(nn.Module):
    """C = A @ B with A, B of shape (N, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# Official size (KernelBench)
N = 2048 * 2

KBENCH_SWEEP = {"N": [1, 2, 7, 31, 64, 127, 257, 500, 1031, 2048]}
KBENCH_SMALL = {"N": 512}


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
