"""KernelBench level 1, problem 73:
"73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped".

Computes a strided, padded transposed 3-D convolution (nn.ConvTranspose3d) with a cubic
kernel, bias off -- and, despite the name, NOT a grouped one.

Official configuration (float32):
    x (4, 32, 32, 64, 128), 32 -> 32 channels, kernel 3x3x3, stride 2, padding 1,
    effective groups 1, effective output_padding 0  ->  output (4, 32, 63, 127, 255).

KernelBench quirk, reproduced on purpose.  The constructor is
    (in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
     bias=False)
but the original get_init_inputs returns, by position,
    [in_channels, out_channels, kernel_size, stride, padding, groups]      (groups = 4)
so the value 4 meant as `groups` lands in the `output_padding` slot and the real `groups`
parameter keeps its default of 1.  The Model then never passes output_padding to
nn.ConvTranspose3d, so that 4 is silently dropped.  Net effect: an ungrouped transposed
convolution (every output channel sums over all 32 input channels, ~4x the FLOPs of the
grouped convolution the name promises) with output_padding 0.

To keep that behaviour and still let a sweep vary the real knobs, get_init_inputs here returns
    [in_channels, out_channels, kernel_size, stride, padding, groups, conv_groups, bias]
i.e. the global `groups` (= 4) still goes, as in the original, into the ignored output_padding
slot, while the new global `conv_groups` (official value 1) is what reaches the operator's
`groups`.  Sweeping `groups` would change nothing, so the sweep varies `conv_groups` instead.
"""
import torch
import torch.nn as nn

KERNELBENCH_ID = 73
KERNELBENCH_LEVEL = 1
KERNELBENCH_NAME = "73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped"
KBENCH_FAMILY = "conv_transpose3d"


class Model(nn.Module):
    """Transposed 3-D convolution: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out),
    D_out = (D - 1) * stride - 2 * padding + (kernel_size - 1) + 1 (H, W alike).
    `output_padding` is accepted and ignored, exactly as in KernelBench."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        # output_padding deliberately not forwarded (KernelBench behaviour).
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose3d(x)


# Official sizes (KernelBench)
batch_size = 4
in_channels = 32
out_channels = 32
kernel_size = 3
depth = 32
height = 64
width = 128
stride = 2
padding = 1
groups = 4        # as in KernelBench: lands in the (ignored) output_padding slot, see above
# Knobs reaching the operator that the original leaves at their constructor defaults
conv_groups = 1   # the operator's real `groups`
bias = False

KBENCH_SWEEP = {
    "batch_size": [1, 2],
    "in_channels": [4, 8, 12, 20],
    "out_channels": [4, 12, 20, 28],
    "kernel_size": [1, 2, 3, 4],
    "depth": [1, 3, 6, 7],
    "height": [2, 5, 8, 11],
    "width": [4, 7, 11, 17],
    "stride": [1, 2, 3, 4],
    "padding": [0, 1, 2],
    "conv_groups": [1, 2, 4],
    "bias": [False, True],
}
KBENCH_SMALL = {"batch_size": 1, "depth": 8, "height": 12, "width": 16}


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    # Positions: 0 in, 1 out, 2 kernel, 3 stride, 4 padding, 5 output_padding (<- groups,
    # ignored), 6 groups (<- conv_groups), 7 bias.
    return [in_channels, out_channels, kernel_size, stride, padding, groups, conv_groups, bias]
