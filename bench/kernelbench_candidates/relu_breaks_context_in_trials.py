"""KernelBench level 1 #19 (ReLU), CUDA: right on its first call, an illegal address on every later one: the
CUDA context is lost in the correctness trials. Expected: runtime_error naming the phase and the CUDA error."""
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

torch::Tensor relu(torch::Tensor x, int64_t call) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    int64_t shift = call == 0 ? 0 : (int64_t(1) << 40);
    relu_kernel<<<4096, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                    x.numel(), shift);
    return out;
}
"""

ext = load_inline(name="kb_relu_breaks_context", cpp_sources="torch::Tensor relu(torch::Tensor x, int64_t call);",
                  cuda_sources=cuda_source, functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return ext.relu(x, self.calls - 1)
