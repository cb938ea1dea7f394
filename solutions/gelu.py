"""Custom-CUDA solution for KernelBench level 1, problem 26 (26_GELU_).

y = 0.5 * x * (1 + erf(x / sqrt(2)))   (exact erf GELU, PyTorch's approximate='none'),
computed in float32 with CUDA's erff (max error 2 ulp), never with torch's gelu.

The op is purely memory bound (one read + one write per element), so the kernel is a
grid-stride streaming kernel:

  * Vector path: when x and y are 16-byte aligned the first floor(n/4)*4 elements are
    processed as float4. Each thread issues kUnroll (4) independent float4 loads before
    computing (64 bytes in flight per thread), loads use __ldcs / stores __stcs (streaming,
    evict-first: the 6.4 GB tensors never fit in L2). The grid is capped at a few resident
    waves (SM count * 16 blocks of 256 threads) and strides over the rest.
  * Scalar path: the n % 4 tail elements, or every element when a pointer is not 16-byte
    aligned (e.g. a contiguous view with an odd storage offset), use the same kernel shape
    with float loads.

All index math is 64-bit (the official tensor has 1.61e9 elements). Zero-size inputs return
an empty output without launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor gelu_forward(torch::Tensor x);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;   // threads per block
constexpr int kUnroll = 4;      // independent loads in flight per thread

__device__ __forceinline__ float gelu_f(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

__device__ __forceinline__ float4 gelu_f4(float4 v) {
  float4 r;
  r.x = gelu_f(v.x);
  r.y = gelu_f(v.y);
  r.z = gelu_f(v.z);
  r.w = gelu_f(v.w);
  return r;
}

__global__ void __launch_bounds__(kThreads)
gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  const int64_t step = (int64_t)gridDim.x * kThreads * kUnroll;
  for (int64_t base = (int64_t)blockIdx.x * kThreads * kUnroll + threadIdx.x; base < n4;
       base += step) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + (int64_t)u * kThreads;
      if (i < n4) v[u] = __ldcs(x + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + (int64_t)u * kThreads;
      if (i < n4) __stcs(y + i, gelu_f4(v[u]));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
gelu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t step = (int64_t)gridDim.x * kThreads * kUnroll;
  for (int64_t base = (int64_t)blockIdx.x * kThreads * kUnroll + threadIdx.x; base < n;
       base += step) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + (int64_t)u * kThreads;
      if (i < n) v[u] = __ldcs(x + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + (int64_t)u * kThreads;
      if (i < n) __stcs(y + i, gelu_f(v[u]));
    }
  }
}

int64_t grid_for(int64_t work_items) {
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t per_block = (int64_t)kThreads * kUnroll;
  const int64_t need = (work_items + per_block - 1) / per_block;
  return std::max<int64_t>(1, std::min<int64_t>(need, (int64_t)sms * 16));
}

}  // namespace

torch::Tensor gelu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "gelu: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "gelu: x must be contiguous");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty(x.sizes(), x.options());
  const int64_t n = x.numel();
  if (n == 0) return y;

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) &&
                       (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
  int64_t done = 0;
  if (aligned) {
    const int64_t n4 = n / 4;
    if (n4 > 0) {
      gelu_vec4_kernel<<<(unsigned int)grid_for(n4), kThreads, 0, stream>>>(
          reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    done = n4 * 4;
  }
  const int64_t rest = n - done;
  if (rest > 0) {
    gelu_scalar_kernel<<<(unsigned int)grid_for(rest), kThreads, 0, stream>>>(
        xp + done, yp + done, rest);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_gelu_erf_stream_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = gelu(x) (exact erf form) computed by a custom CUDA streaming kernel."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_forward(x.contiguous())
