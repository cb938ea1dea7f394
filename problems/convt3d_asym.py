"""KernelBench level 1, problem 58: "58_conv_transposed_3D__asymmetric_input__asymmetric_kernel".

Computes a transposed 3-D convolution (nn.ConvTranspose3d) with an asymmetric (kd, kh, kw)
kernel on a non-cubic input, bias off.

Official configuration (float32):
    x (16, 32, 16, 32, 64), 32 -> 16 channels, kernel (3, 5, 7), stride (1, 1, 1),
    padding (0, 0, 0), output_padding (0, 0, 0), groups 1  ->  output (16, 16, 18, 36, 70).

The original leaves stride / padding / output_padding / groups / bias at the constructor
defaults (tuples, as its signature says); here they are module globals with those default
values, passed positionally in the constructor's order.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 58
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "58_conv_transposed_3D__asymmetric_input__asymmetric_kernel"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Transposed 3-D convolution: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out),
    D_out = (D - 1) * stride[0] - 2 * padding[0] + (kd - 1) + output_padding[0] + 1
    (H, W likewise with indices 1, 2)."""

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
out_channels = 16
kernel_size = (3, 5, 7)
depth_in = 16
height_in = 32
width_in = 64
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
    "kernel_size": [(3, 5, 7), (1, 2, 3), (2, 2, 2), (3, 1, 4), (1, 1, 1)],
    "depth_in": [1, 3, 6, 9],
    "height_in": [2, 5, 8, 11],
    "width_in": [4, 7, 11, 17],
    "stride": [(1, 1, 1), (2, 2, 2), (2, 3, 2), (3, 2, 3), (3, 3, 2), (2, 2, 3)],
    "padding": [(0, 0, 0), (1, 2, 3), (0, 1, 0), (2, 0, 1)],
    "output_padding": [(0, 0, 0), (1, 1, 1), (1, 0, 1)],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "depth_in": 8, "height_in": 8, "width_in": 16}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth_in, height_in, width_in)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias]
