"""KernelBench level 1, problem 78:
"78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__".

Computes a padded transposed 2-D convolution (nn.ConvTranspose2d) with an asymmetric kernel,
bias off.

Official configuration (float32):
    x (8, 32, 512, 1024), 32 -> 32 channels, kernel (3, 7), stride (1, 1), padding (1, 3)
    ->  output (8, 32, 512, 1024)  (padding exactly cancels the kernel growth).

The original constructor is (in, out, kernel_size, stride, padding, bias): no output_padding,
dilation or groups parameters.  bias was left at its default by the original get_init_inputs;
it is a module global here (appended in the constructor's order).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 78
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__"
KBENCH_FAMILY = "conv_transpose2d"


class Model(nn.Module):
    """Transposed 2-D convolution: (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = (H - 1) * stride[0] - 2 * padding[0] + (kh - 1) + 1 (W likewise)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose2d(x)


# Official sizes (KernelBench)
batch_size = 8
in_channels = 32
out_channels = 32
kernel_size = (3, 7)
height = 512
width = 1024
stride = (1, 1)
padding = (1, 3)
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [1, 3, 8, 33],
    "out_channels": [2, 5, 16, 35],
    "kernel_size": [(3, 7), (1, 3), (2, 2), (5, 1), (4, 5)],
    "height": [1, 5, 16, 29],
    "width": [3, 17, 31, 45],
    "stride": [(1, 1), (2, 3), (3, 2), (2, 2)],
    "padding": [(1, 3), (0, 0), (1, 2), (2, 1)],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "height": 64, "width": 128}


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias]
