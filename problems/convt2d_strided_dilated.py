"""KernelBench level 1, problem 81:
"81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__".

Computes a strided, padded, dilated transposed 2-D convolution (nn.ConvTranspose2d) with a
square kernel, bias off.

Official configuration (float32):
    x (16, 32, 64, 128), 32 -> 64 channels, kernel 3x3, stride 5, padding 1, dilation 2
    ->  output (16, 64, 318, 638).

Note: with stride 5 > dilation * (kernel - 1) the taps never overlap: each output position
receives at most one tap per dimension, and positions o with (o + 1) % 5 in {1, 3} (two of
every five rows/columns) receive none, so 1 - (3/5)^2 = 64% of the official output is exactly
zero.  The sweep varies stride/dilation/padding so kernels cannot rely on that.

The original constructor is (in, out, kernel_size, stride, padding, dilation, bias): no
output_padding or groups parameters.  bias was left at its default by the original
get_init_inputs; it is a module global here (appended in the constructor's order).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 81
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__"
KBENCH_FAMILY = "conv_transpose2d"


class Model(nn.Module):
    """Transposed 2-D convolution: (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = (H - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + 1 (same for W)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose2d(x)


# Official sizes (KernelBench)
batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
height_in = 64
width_in = 128
stride = 5
padding = 1
dilation = 2
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [1, 3, 8, 33],
    "out_channels": [2, 5, 16, 35],
    "kernel_size": [1, 2, 3, 4],
    "height_in": [1, 5, 16, 29],
    "width_in": [3, 17, 31, 45],
    "stride": [1, 2, 3, 5],
    "padding": [0, 1, 2, 3],
    "dilation": [1, 2, 3],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "height_in": 32, "width_in": 64}


def get_inputs():
    return [torch.rand(batch_size, in_channels, height_in, width_in)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, bias]
