"""KernelBench level 1, problem 79:
"79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__".

Computes a strided, padded, dilated transposed 1-D convolution (nn.ConvTranspose1d), bias off.

Official configuration (float32):
    x (16, 32, 131072), 32 -> 64 channels, kernel 3, stride 2, padding 1, dilation 2
    ->  output (16, 64, 262145).

Note: with stride 2, dilation 2 and padding 1 every tap lands on an odd output index
(o = 2*i + 2*k - 1), so all even output positions are exactly zero at the official
configuration.  The sweep varies stride/dilation/padding so kernels cannot rely on that.

The original constructor is (in, out, kernel_size, stride, padding, dilation, bias) with no
groups / output_padding.  bias was left at its default by the original get_init_inputs; it is a
module global here (appended in the constructor's order).
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 79
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "79_conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__"
KBENCH_FAMILY = "conv_transpose1d"


class Model(nn.Module):
    """Transposed 1-D convolution: (N, C_in, L) -> (N, C_out, L_out),
    L_out = (L - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d_transpose(x)


# Official sizes (KernelBench)
batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
length = 131072
stride = 2
padding = 1
dilation = 2
# Knob the original leaves at its constructor default
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "in_channels": [1, 3, 8, 33],
    "out_channels": [2, 5, 16, 67],
    "kernel_size": [1, 2, 3, 4],
    "length": [1, 2, 7, 16, 37, 130, 1031],
    "stride": [1, 2, 3, 5],
    "padding": [0, 1, 2, 3],
    "dilation": [1, 2, 3],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 2, "length": 1024}


def get_inputs():
    return [torch.rand(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, bias]
