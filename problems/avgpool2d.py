"""KernelBench level 1, problem 45: "45_Average_Pooling_2D".

Computes 2-D average pooling (nn.AvgPool2d, count_include_pad=True, ceil_mode=False).

Official configuration: x (16, 64, 2048, 2048) float32, kernel 11, stride None (= kernel, i.e.
11), padding 0  ->  output (16, 64, 186, 186).
The input has 4.29e9 elements (17.2 GB): more than 2^31, so 32-bit element indexing overflows.
Memory bound: ~17.2 GB read, ~4.3 ms at 4 TB/s.

The original passes only kernel_size; stride and padding (constructor defaults None and 0) are
module globals here, passed positionally in the constructor's order.  With padding > 0 the
zero padding counts in the divisor (count_include_pad=True, PyTorch's default).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 45
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "45_Average_Pooling_2D"
KBENCH_FAMILY = "avg_pool2d"


class Model(nn.Module):
    """y = AvgPool2d(kernel_size, stride, padding)(x); stride None means stride = kernel_size."""

    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.avg_pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.avg_pool(x)


# Official sizes (KernelBench)
batch_size = 16
channels = 64
height = 2048
width = 2048
kernel_size = 11
# Knobs the original leaves at their constructor defaults
stride = None
padding = 0

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "channels": [1, 3, 8, 33],
    "height": [11, 16, 37, 128],
    "width": [13, 32, 61, 130],
    "kernel_size": [2, 3, 5, 7, 11],
    "stride": [None, 1, 2, 3],
    "padding": [0, 1, 2],
}
KBENCH_SMALL = {"batch_size": 2, "channels": 8, "height": 512, "width": 512}


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
