"""Swish as a C++ loop, built on the CPU by load_inline: y[i] = x[i] / (1 + exp(-x[i])).

One pass over x instead of PyTorch's two ops, yet single-threaded and scalar, so PyTorch's vectorised
ops are usually faster: expect a speedup below 1x. Expected verdict: correct.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor swish(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "swish: a CPU extension (run kbench with --device cpu)");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "swish: expected float32");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* result = out.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) {
        result[i] = in[i] / (1.0f + std::exp(-in[i]));
    }
    return out;
}
"""

# Without -O3 the compiler does not optimise at all (load_inline passes no -O flag).
swish_ext = load_inline(name="quickstart_swish", cpp_sources=cpp_source, functions=["swish"],
                        extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swish_ext.swish(x)
