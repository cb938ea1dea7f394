"""Candidate for problems/convt3d_asym_input.py (KernelBench L1 #70): the reference's own
nn.ConvTranspose3d, so kbench times the cuDNN reference as a candidate (timing fidelity, not speed)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, dilation: int = 1, groups: int = 1,
                 bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, (kernel_size, kernel_size, kernel_size), stride=stride,
            padding=padding, output_padding=output_padding, dilation=dilation, groups=groups,
            bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose3d(x)
