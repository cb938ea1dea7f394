"""KernelBench level 1, problem 69: "69_conv_transposed_2D__asymmetric_input__asymmetric_kernel".

Computes a transposed 2-D convolution (nn.ConvTranspose2d) on a rectangular input with an
asymmetric (kh, kw) kernel, bias off.

Official configuration (float32):
    x (64, 64, 128, 256), 64 -> 128 channels, kernel (3, 5), stride (1, 1), padding (0, 0),
    output_padding (0, 0), dilation (1, 1), groups 1  ->  output (64, 128, 130, 260).

The original leaves stride / padding / output_padding / dilation / groups / bias at the
constructor defaults (tuples, as its signature says); here they are module globals with those
default values, passed positionally in the constructor's order (note: dilation comes before
groups in this constructor).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 69
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "69_conv_transposed_2D__asymmetric_input__asymmetric_kernel"
KBENCH_FAMILY = "conv_transpose2d"


class Model(nn.Module):
    """Transposed 2-D convolution: (N, C_in, H, W) -> (N, C_out, H_out, W_out),
    H_out = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    (W likewise with index 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), output_padding: tuple = (0, 0),
                 dilation: tuple = (1, 1), groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose2d(x)


# Official sizes (KernelBench)
batch_size = 64
in_channels = 64
out_channels = 128
kernel_size = (3, 5)
height_in = 128
width_in = 256
# Knobs the original leaves at their constructor defaults
stride = (1, 1)
padding = (0, 0)
output_padding = (0, 0)
dilation = (1, 1)
groups = 1
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [4, 8, 12, 36],
    "out_channels": [4, 12, 20, 36],
    "kernel_size": [(3, 5), (1, 3), (2, 2), (4, 1), (5, 3)],
    "height_in": [1, 5, 16, 29],
    "width_in": [3, 17, 31, 45],
    "stride": [(1, 1), (2, 3), (3, 2), (2, 2)],
    "padding": [(0, 0), (1, 2), (2, 1)],
    "output_padding": [(0, 0), (1, 1), (1, 0)],
    "dilation": [(1, 1), (2, 1), (1, 3)],
    "groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "height_in": 32, "width_in": 64}


def get_inputs():
    return [torch.rand(batch_size, in_channels, height_in, width_in)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation,
            groups, bias]
