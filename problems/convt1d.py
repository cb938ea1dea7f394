"""KernelBench level 1, problem 64: "64_conv_transposed_1D".

Computes a transposed 1-D convolution (nn.ConvTranspose1d), bias off.

Official configuration (float32):
    x (64, 128, 65536), 128 -> 128 channels, kernel 3, stride 1, padding 0,
    output_padding 0, groups 1  ->  output (64, 128, 65538).

The original leaves stride / padding / output_padding / groups / bias at the constructor
defaults; here they are module globals with those same default values, passed positionally in
the constructor's order, so the official behaviour is unchanged and a sweep can vary them.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 64
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "64_conv_transposed_1D"
KBENCH_FAMILY = "conv_transpose1d"


class Model(nn.Module):
    """Transposed 1-D convolution: (N, C_in, L) -> (N, C_out, L_out),
    L_out = (L - 1) * stride - 2 * padding + (kernel_size - 1) + output_padding + 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d_transpose(x)


# Official sizes (KernelBench)
batch_size = 64
in_channels = 128
out_channels = 128
kernel_size = 3
length = 65536
# Knobs the original leaves at their constructor defaults
stride = 1
padding = 0
output_padding = 0
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [4, 8, 12, 36],
    "out_channels": [4, 12, 20, 68],
    "kernel_size": [1, 2, 3, 5],
    "length": [1, 2, 7, 16, 37, 130, 1031],
    "stride": [1, 2, 3, 4, 5],
    "padding": [0, 1, 2],
    "output_padding": [0, 1],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 2, "length": 512}


def get_inputs():
    return [torch.rand(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias]
