"""KernelBench level 1, problem 61: "61_conv_transposed_3D__square_input__square_kernel".

Computes a transposed 3-D convolution (nn.ConvTranspose3d) with a cubic kernel, bias off.

Official configuration (float32):
    x (8, 48, 64, 64, 64), 48 -> 48 channels, kernel 3x3x3, stride 1, padding 0,
    output_padding 0, groups 1  ->  output (8, 48, 66, 66, 66).

The original leaves stride / padding / output_padding / groups / bias at the constructor
defaults; here they are module globals with those default values (passed positionally in the
constructor's order).  depth / height / width are separate globals in the original too and the
sweep varies them independently.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 61
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "61_conv_transposed_3D__square_input__square_kernel"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Transposed 3-D convolution: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out),
    D_out = (D - 1) * stride - 2 * padding + (kernel_size - 1) + output_padding + 1 (H, W alike)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, (kernel_size, kernel_size, kernel_size), stride=stride,
            padding=padding, output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose3d(x)


# Official sizes (KernelBench)
batch_size = 8
in_channels = 48
out_channels = 48
kernel_size = 3
depth = 64
height = 64
width = 64
# Knobs the original leaves at their constructor defaults
stride = 1
padding = 0
output_padding = 0
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2],
    "in_channels": [4, 8, 12, 20],
    "out_channels": [4, 12, 20, 28],
    "kernel_size": [1, 2, 3, 4],
    "depth": [1, 3, 6, 7],
    "height": [2, 5, 8, 11],
    "width": [4, 7, 11, 17],
    "stride": [1, 2, 3, 4, 5],
    "padding": [0, 1, 2],
    "output_padding": [0, 1],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "depth": 12, "height": 12, "width": 12}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias]
