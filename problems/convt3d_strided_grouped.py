"""KernelBench level 1, problem 72:
"72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_".

Computes a strided, padded, grouped transposed 3-D convolution (nn.ConvTranspose3d) with an
asymmetric kernel and output_padding, bias off.

Official configuration (float32):
    x (8, 32, 12, 24, 48), 32 -> 32 channels, kernel (3, 5, 7), stride (2, 2, 2),
    padding (1, 2, 3), output_padding (1, 1, 1), groups 4  ->  output (8, 32, 24, 48, 96).

All knobs except bias are passed by the original get_init_inputs; bias (left at its default
there) is a module global here, appended in the constructor's order.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 72
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Grouped transposed 3-D convolution: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out),
    D_out = (D - 1) * stride[0] - 2 * padding[0] + (kd - 1) + output_padding[0] + 1
    (H, W likewise)."""

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
batch_size = 8
in_channels = 32
out_channels = 32
kernel_size = (3, 5, 7)
depth = 12
height = 24
width = 48
stride = (2, 2, 2)
padding = (1, 2, 3)
output_padding = (1, 1, 1)
groups = 4
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2],
    "in_channels": [4, 8, 12, 20],
    "out_channels": [4, 12, 20, 28],
    "kernel_size": [(3, 5, 7), (1, 2, 3), (2, 2, 2), (3, 1, 4), (1, 1, 1)],
    "depth": [1, 3, 6, 9],
    "height": [2, 5, 8, 11],
    "width": [4, 7, 11, 17],
    "stride": [(2, 2, 2), (1, 1, 1), (2, 3, 2), (3, 2, 3), (3, 3, 2), (2, 2, 3)],
    "padding": [(1, 2, 3), (0, 0, 0), (0, 1, 0), (2, 0, 1)],
    "output_padding": [(1, 1, 1), (0, 0, 0), (1, 0, 1)],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 2, "depth": 6, "height": 12, "width": 24}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias]
