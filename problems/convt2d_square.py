"""KernelBench level 1, problem 57: "57_conv_transposed_2D__square_input__square_kernel".

Computes a transposed 2-D convolution (nn.ConvTranspose2d) with a square kernel, bias off.

Official configuration (float32):
    x (8, 64, 1024, 1024), 64 -> 64 channels, kernel 3x3, stride 1, padding 0,
    output_padding 0, groups 1  ->  output (8, 64, 1026, 1026).

The original leaves stride / padding / output_padding / groups / bias at the constructor
defaults; here they are module globals with those default values (passed positionally in the
constructor's order).  height and width are separate globals in the original too; the sweep
varies them independently, so kernels must not assume a square input.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 57
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "57_conv_transposed_2D__square_input__square_kernel"
KBENCH_FAMILY = "conv_transpose2d"


class Model(nn.Module):
    """Transposed 2-D convolution: (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = (H - 1) * stride - 2 * padding + (kernel_size - 1) + output_padding + 1 (same for W)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
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
kernel_size = 3
height = 1024
width = 1024
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
    "kernel_size": [1, 2, 3, 4, 5],
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
