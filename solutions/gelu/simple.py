"""Simple custom-CUDA solution for KernelBench level 1, problem 26 (26_GELU_).

y = 0.5 * x * (1 + erf(x / sqrt(2)))   (exact erf GELU, PyTorch's approximate='none'),
computed in float32 with CUDA's erff, never with torch's gelu.

A deliberately plain first-attempt kernel (the optimised one is solutions/gelu.py): one thread
per element, 256-thread blocks, scalar float loads and stores (consecutive threads touch
consecutive floats, so every access is coalesced and no alignment assumption is needed). The
element index is 64-bit (the official tensor has 1.61e9 elements); the launch covers every
element with one thread when the grid allows it (6.3e6 blocks at the official size) and the
kernel keeps a grid-stride loop so a tensor too large for one grid is still fully covered.
Zero-size inputs return an empty output without launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor gelu_simple_forward(torch::Tensor x);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <algorithm>
#include <climits>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__global__ void gelu_simple_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
  }
}

}  // namespace

torch::Tensor gelu_simple_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "gelu: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu: x must be float32");
  x = x.contiguous();
  const at::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, (int64_t)INT_MAX);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  gelu_simple_kernel<<<(unsigned int)blocks, kThreads, 0, stream>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kbench_gelu_simple_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["gelu_simple_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = gelu(x) (exact erf form), one CUDA thread per element."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_simple_forward(x.contiguous())
