"""KernelBench level 1, problem 68: "68_conv_transposed_3D__square_input__asymmetric_kernel".

Computes a transposed 3-D convolution (nn.ConvTranspose3d) with a (3, 5, 5) kernel, bias off.

Official configuration (float32):
    x (16, 32, 64, 64, 64), 32 -> 64 channels, kernel (3, 5, 5), stride (1, 1, 1),
    padding (0, 0, 0), output_padding (0, 0, 0), groups 1  ->  output (16, 64, 66, 68, 68).

Naming quirk kept from the original: the kernel is built as (kernel_depth, kernel_width,
kernel_height) and the input as (batch, channels, depth, width, height), i.e. the globals
called "width" feed PyTorch's H axis (dim 3) and "height" feeds the W axis (dim 4).  Shapes are
consistent (kernel_width pairs with width), so this only matters for reading the code; the
sweep varies all three spatial sizes and kernel extents independently.

The original leaves stride / padding / output_padding / groups / bias at the constructor
defaults (tuples, as its signature says); here they are module globals with those default
values, passed positionally in the constructor's order.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 68
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "68_conv_transposed_3D__square_input__asymmetric_kernel"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Transposed 3-D convolution: (N, C_in, D, A, B) -> (N, C_out, D_out, A_out, B_out),
    each out = (in - 1) * stride - 2 * padding + (k - 1) + output_padding + 1 per axis."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1, 1), padding: tuple = (0, 0, 0),
                 output_padding: tuple = (0, 0, 0), groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose3d(x)


# Official sizes (KernelBench)
batch_size = 16
in_channels = 32
out_channels = 64
kernel_depth = 3
kernel_width = 5
kernel_height = 5
depth = 64
width = 64
height = 64
# Knobs the original leaves at their constructor defaults
stride = (1, 1, 1)
padding = (0, 0, 0)
output_padding = (0, 0, 0)
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2],
    "in_channels": [4, 8, 12, 20],
    "out_channels": [4, 12, 20, 28],
    "kernel_depth": [1, 2, 3],
    "kernel_width": [1, 3, 5],
    "kernel_height": [2, 4, 5],
    "depth": [1, 3, 6, 9],
    "width": [2, 5, 8, 11],
    "height": [4, 7, 11, 17],
    "stride": [(1, 1, 1), (2, 2, 2), (2, 3, 2), (3, 2, 3), (3, 3, 2), (2, 2, 3)],
    "padding": [(0, 0, 0), (1, 2, 2), (0, 1, 0), (2, 0, 1)],
    "output_padding": [(0, 0, 0), (1, 1, 1), (1, 0, 1)],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "depth": 10, "width": 10, "height": 10}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, width, height)]


def get_init_inputs():
    return [in_channels, out_channels, (kernel_depth, kernel_width, kernel_height), stride,
            padding, output_padding, groups, bias]
