"""KernelBench level 1, problem 65: "65_conv_transposed_2D__square_input__asymmetric_kernel".

Computes a transposed 2-D convolution (nn.ConvTranspose2d) with an asymmetric (kh, kw) kernel,
bias off.

Official configuration (float32):
    x (8, 64, 512, 512), 64 -> 64 channels, kernel (3, 7), stride 1, padding 0,
    output_padding 0, groups 1  ->  output (8, 64, 514, 518).

The original leaves stride / padding / output_padding / groups / bias at the constructor
defaults (ints, as its signature says); here they are module globals with those default values
(passed positionally in the constructor's order).  The sweep varies height and width
independently.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 65
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "65_conv_transposed_2D__square_input__asymmetric_kernel"
KBENCH_FAMILY = "conv_transpose2d"


class Model(nn.Module):
    """Transposed 2-D convolution with kernel (kh, kw): (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = (H - 1) * stride - 2 * padding + (kh - 1) + output_padding + 1 (W likewise with kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose2d(x)


# Official sizes (KernelBench)
batch_size = 8
in_channels = 64
out_channels = 64
kernel_size = (3, 7)
height = 512
width = 512
# Knobs the original leaves at their constructor defaults
stride = 1
padding = 0
output_padding = 0
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [4, 8, 12, 36],
    "out_channels": [4, 12, 20, 36],
    "kernel_size": [(3, 7), (1, 4), (2, 3), (5, 1), (4, 4)],
    "height": [1, 5, 16, 29],
    "width": [3, 17, 31, 45],
    "stride": [1, 2, 3, 4, 5],
    "padding": [0, 1, 2],
    "output_padding": [0, 1],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "height": 64, "width": 64}


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias]
