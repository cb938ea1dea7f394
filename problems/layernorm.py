"""Layer normalisation over the last dimension of a (batch, seq_len, hidden) tensor.

Adapted from KernelBench level 1 problem 40 ("40_LayerNorm"), which normalises a
(16, 64, 256, 256) tensor over its last three dimensions; that official size moves only
~0.5 GB (~0.13 ms on an H200) and its affine parameters are the identity.  This problem is
therefore not KernelBench 40 (no KERNELBENCH_ID): it keeps the Model(normalized_shape)
interface but uses the transformer layout and larger sizes, and it gives the affine weight and
bias random values so that a kernel ignoring them fails.

Computes y = (x - mean) / sqrt(var + 1e-5) * weight + bias over the last dimension
(biased variance, as nn.LayerNorm).

Official configuration: x (32, 4096, 8192) float32 (1.07e9 elements, 4.3 GB), weight and bias
(8192,)  ->  y of the same shape as x.  Memory bound: >= 8.6 GB of traffic, ~2.1 ms at 4 TB/s.

Parameter initialisation (for solution authors): after building nn.LayerNorm, weight is
filled with 0.5 + torch.rand(hidden) and then bias with torch.rand(hidden) - 0.5, in that
order, from the default generator.
"""
import torch
import torch.nn as nn

KBENCH_FAMILY = "layer_norm"


class Model(nn.Module):
    """y = LayerNorm(normalized_shape)(x), with random affine parameters."""

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():
            self.ln.weight.copy_(0.5 + torch.rand(self.ln.weight.shape))
            self.ln.bias.copy_(torch.rand(self.ln.bias.shape) - 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


# Official sizes
batch_size = 32
seq_len = 4096
hidden = 8192

KBENCH_SWEEP = {
    "batch_size": [1, 2, 3],
    "seq_len": [1, 5, 127, 256],
    "hidden": [1, 3, 64, 1000, 4097],
}
KBENCH_SMALL = {"batch_size": 2, "seq_len": 256, "hidden": 1024}


def get_inputs():
    return [torch.rand(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [(hidden,)]
