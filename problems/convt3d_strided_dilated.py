"""KernelBench level 1, problem 77:
"77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__".

Computes a strided, padded, dilated transposed 3-D convolution (nn.ConvTranspose3d) with a
cubic kernel, bias off.

Official configuration (float32):
    x (16, 32, 16, 32, 32), 32 -> 64 channels, kernel 3x3x3, stride 2, padding 1, dilation 2
    ->  output (16, 64, 33, 65, 65).

Note: with stride 2, dilation 2 and padding 1 every tap lands on an odd index in each spatial
dimension (o = 2*i + 2*k - 1), so only 1/8 of the official output (odd, odd, odd positions)
can be non-zero; the rest is exactly zero.  The sweep varies stride/dilation/padding so kernels
cannot rely on that.

The original constructor is (in, out, kernel_size, stride, padding, dilation, bias): no
output_padding or groups parameters.  bias was left at its default by the original
get_init_inputs; it is a module global here (appended in the constructor's order).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 77
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Transposed 3-D convolution: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out),
    D_out = (D - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + 1 (H, W alike)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, dilation=dilation, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose3d(x)


# Official sizes (KernelBench)
batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
depth = 16
height = 32
width = 32
stride = 2
padding = 1
dilation = 2
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2],
    "in_channels": [1, 3, 8, 19],
    "out_channels": [2, 5, 16, 23],
    "kernel_size": [1, 2, 3, 4],
    "depth": [1, 3, 6, 9],
    "height": [2, 5, 8, 11],
    "width": [4, 7, 11, 17],
    "stride": [1, 2, 3],
    "padding": [0, 1, 2],
    "dilation": [1, 2, 3],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "depth": 8, "height": 12, "width": 12}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, bias]
