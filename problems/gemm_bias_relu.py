"""KernelBench level 2, problem 76: "76_Gemm_Add_ReLU".

Computes y = relu(x @ W^T + b): a bias-free nn.Linear, then a separate bias add, then ReLU.

Official configuration (float32): x (1024, 8192), W (8192, 8192), b (8192,)  ->  y (1024, 8192).
2 * 1024 * 8192 * 8192 = 137 GFLOP (~2.7 ms at 50 TFLOP/s fp32); W is 268 MB.

Parameters: W gets nn.Linear's default init, then b = torch.randn(out_features) is drawn (in
that order).  The original defines a module global bias_shape = (out_features,) at import
time; here get_init_inputs derives it from out_features at call time so overriding
out_features cannot leave a stale bias shape.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 76
KERNELBENCH_LEVEL = 2
KERNELBENCH_NAME = "76_Gemm_Add_ReLU"
KBENCH_FAMILY = "gemm_bias_relu"


class Model(nn.Module):
    """y = relu(Linear(in_features, out_features, bias=False)(x) + bias)."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x + self.bias
        return torch.relu(x)


# Official sizes (KernelBench)
batch_size = 1024
in_features = 8192
out_features = 8192

KBENCH_SWEEP = {
    "batch_size": [1, 3, 64, 129],
    "in_features": [1, 5, 128, 1000],
    "out_features": [1, 7, 256, 1025],
}
KBENCH_SMALL = {"batch_size": 128, "in_features": 1024, "out_features": 1024}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, (out_features,)]
