"""KernelBench level 1, problem 63: "63_conv_standard_2D__square_input__square_kernel".

Computes a standard 2-D convolution (nn.Conv2d) with a square kernel, bias off.

Official configuration (float32):
    x (16, 16, 1024, 1024), 16 -> 128 channels, kernel 3x3, stride 1, padding 0, dilation 1,
    groups 1  ->  output (16, 128, 1022, 1022).
2 * 16 * 128 * 16 * 9 * 1022^2 = 616 GFLOP (~12 ms at 50 TFLOP/s strict fp32; less where the
reference is allowed TF32) plus 1.1 GB in / 8.6 GB out.

The original leaves stride / padding / dilation / groups / bias at the constructor defaults;
here they are module globals with those default values (passed positionally in the
constructor's order) so a sweep can vary them.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 63
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "63_conv_standard_2D__square_input__square_kernel"
KBENCH_FAMILY = "conv2d"


class Model(nn.Module):
    """2-D convolution: (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = floor((H + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1 (same for W)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size),
                                stride=stride, padding=padding, dilation=dilation, groups=groups,
                                bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


# Official sizes (KernelBench)
batch_size = 16
in_channels = 16
out_channels = 128
kernel_size = 3
width = 1024
height = 1024
# Knobs the original leaves at their constructor defaults
stride = 1
padding = 0
dilation = 1
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [4, 8, 12, 36],
    "out_channels": [4, 12, 20, 68],
    "kernel_size": [1, 2, 3, 5],
    "height": [7, 16, 33, 64],
    "width": [5, 16, 37, 67],
    "stride": [1, 2, 3],
    "padding": [0, 1, 2],
    "dilation": [1, 2, 3],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "height": 128, "width": 128}


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias]
