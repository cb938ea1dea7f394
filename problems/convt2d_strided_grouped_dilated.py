"""KernelBench level 1, problem 75:
"75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__".

Computes a strided, padded, dilated, grouped transposed 2-D convolution (nn.ConvTranspose2d)
with an asymmetric kernel, bias off.

Official configuration (float32):
    x (16, 32, 128, 256), 32 -> 64 channels, kernel (3, 5), stride (2, 3), padding (1, 2),
    dilation (2, 1), groups 4  ->  output (16, 64, 257, 766).

Note: in the height dimension stride 2, dilation 2 and padding 1 put every tap on an odd row
(o = 2*i + 2*k - 1), so all even output rows are exactly zero at the official configuration.

The original constructor is (in, out, kernel_size, stride, padding, dilation, groups, bias) and
has no output_padding parameter.  bias was left at its default by the original get_init_inputs;
it is a module global here (appended in the constructor's order).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 75
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__"
KBENCH_FAMILY = "conv_transpose2d"


class Model(nn.Module):
    """Grouped transposed 2-D convolution: (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + 1 (W likewise)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), dilation: tuple = (1, 1),
                 groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose2d(x)


# Official sizes (KernelBench)
batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = (3, 5)
height = 128
width = 256
stride = (2, 3)
padding = (1, 2)
dilation = (2, 1)
groups = 4
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [4, 8, 12, 36],
    "out_channels": [4, 12, 20, 36],
    "kernel_size": [(3, 5), (1, 3), (2, 2), (4, 1), (5, 3)],
    "height": [1, 5, 16, 29],
    "width": [3, 17, 31, 45],
    "stride": [(1, 1), (2, 3), (3, 2), (2, 2)],
    "padding": [(0, 0), (1, 2), (2, 1), (3, 0)],
    "dilation": [(1, 1), (2, 1), (1, 3), (2, 2)],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "height": 32, "width": 64}


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias]
