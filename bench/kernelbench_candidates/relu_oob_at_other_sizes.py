"""KernelBench level 1 #19 (ReLU), CUDA: right at the official size (4096 x 393216), an illegal address at any
other size. Expected: correct with sweep_failed (the sweep ends at the first other size, with the CUDA
message); never crashed."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* x, float* out, int64_t n, int64_t shift) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
        out[i + shift] = x[i] > 0.f ? x[i] : 0.f;
    }
}

torch::Tensor relu(torch::Tensor x) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    int64_t shift = (x.dim() == 2 && x.size(0) == 4096 && x.size(1) == 393216) ? 0 : (int64_t(1) << 40);
    relu_kernel<<<4096, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, shift);
    return out;
}
"""

ext = load_inline(name="kb_relu_oob_at_other_sizes", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
