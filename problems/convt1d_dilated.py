"""KernelBench level 1, problem 74: "74_conv_transposed_1D_dilated".

Computes a dilated transposed 1-D convolution (nn.ConvTranspose1d), bias off.

Official configuration (float32):
    x (32, 32, 131072), 32 -> 64 channels, kernel 5, stride 1, padding 0, dilation 3
    ->  output (32, 64, 131084).

The original constructor takes (in, out, kernel_size, stride, padding, dilation, bias) and
has no groups / output_padding parameters, so those stay fixed at 1 / 0.  Only bias was left
at its default by the original get_init_inputs; it is a module global here (appended in the
constructor's order) so a sweep can vary it.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 74
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "74_conv_transposed_1D_dilated"
KBENCH_FAMILY = "conv_transpose1d"


class Model(nn.Module):
    """Transposed 1-D convolution with dilation: (N, C_in, L) -> (N, C_out, L_out),
    L_out = (L - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d_transpose(x)


# Official sizes (KernelBench)
batch_size = 32
in_channels = 32
out_channels = 64
kernel_size = 5
length = 131072
stride = 1
padding = 0
dilation = 3
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [1, 3, 8, 33],
    "out_channels": [2, 5, 16, 67],
    "kernel_size": [1, 2, 3, 5],
    "length": [1, 2, 7, 16, 37, 130, 1031],
    "stride": [1, 2, 3],
    "padding": [0, 1, 2, 4],
    "dilation": [1, 2, 3],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 2, "length": 1024}


def get_inputs():
    return [torch.rand(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, bias]
