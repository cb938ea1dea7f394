"""KernelBench level 1, problem 70: "70_conv_transposed_3D__asymmetric_input__square_kernel".

Computes a transposed 3-D convolution (nn.ConvTranspose3d) with a cubic kernel, bias off.
(The KernelBench title says "asymmetric input", but its official input is a 96^3 cube.)

Official configuration (float32):
    x (8, 48, 96, 96, 96), 48 -> 24 channels, kernel 3x3x3, stride 1, padding 0,
    output_padding 0, dilation 1, groups 1  ->  output (8, 24, 98, 98, 98).

The original leaves stride / padding / output_padding / dilation / groups / bias at the
constructor defaults; here they are module globals with those default values, passed
positionally in the constructor's order (dilation comes before groups in this constructor).
The sweep varies depth, height and width independently.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 70
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "70_conv_transposed_3D__asymmetric_input__square_kernel"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Transposed 3-D convolution: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out),
    D_out = (D - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + output_padding + 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, dilation: int = 1, groups: int = 1,
                 bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, (kernel_size, kernel_size, kernel_size), stride=stride,
            padding=padding, output_padding=output_padding, dilation=dilation, groups=groups,
            bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose3d(x)


# Official sizes (KernelBench)
batch_size = 8
in_channels = 48
out_channels = 24
kernel_size = 3
depth = 96
height = 96
width = 96
# Knobs the original leaves at their constructor defaults
stride = 1
padding = 0
output_padding = 0
dilation = 1
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2],
    "in_channels": [4, 8, 12, 20],
    "out_channels": [4, 12, 20, 28],
    "kernel_size": [1, 2, 3, 4],
    "depth": [1, 3, 6, 9],
    "height": [2, 5, 8, 11],
    "width": [4, 7, 11, 17],
    "stride": [1, 2, 3],
    "padding": [0, 1, 2],
    "output_padding": [0, 1],
    "dilation": [1, 2, 3],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "depth": 12, "height": 12, "width": 12}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation,
            groups, bias]
