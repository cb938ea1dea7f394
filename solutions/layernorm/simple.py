"""Simple custom-CUDA solution for the LayerNorm problem (adapted from KernelBench level 1, 40).

y = (x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape dims
(biased variance, exactly nn.LayerNorm's definition), never calling torch's layer_norm.

ModelNew builds the same nn.LayerNorm as the reference Model (attribute `ln`) and fills its
weight with 0.5 + rand and then its bias with rand - 0.5, in the same order from the default
generator, so seeded construction gives identical parameters; the module is only a parameter
container (weight, bias, eps).

A deliberately plain first-attempt kernel (the optimised one is solutions/layernorm.py): x is
viewed as (rows, H) with H = prod(normalized_shape) and one 256-thread block handles one row in
three block-strided passes with scalar, coalesced float loads:
  1. per-thread float32 sums, shared-memory tree reduction -> mean = sum / H;
  2. per-thread sums of (x - mean)^2, shared-memory tree reduction -> var = sum / H
     (two-pass, so no E[x^2] - mean^2 cancellation);
  3. y = (x - mean) * (1 / sqrt(var + eps)) * weight + bias.
A row of the official H = 8192 is 32 KB, so passes 2 and 3 mostly re-read it from L2.
Row offsets are 64-bit (the official x has 1.07e9 elements). Zero-size inputs return without
launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor layernorm_simple_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                                       int64_t H, double eps);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <climits>
#include <cstdint>
#include <math.h>

namespace {

constexpr int kThreads = 256;  // power of two (tree reduction)

// Block-wide sum of one float per thread; every thread gets the result.
__device__ float block_sum(float v, float* red) {
  const int tid = threadIdx.x;
  red[tid] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  const float total = red[0];
  __syncthreads();  // red may be reused by the next call
  return total;
}

__global__ void __launch_bounds__(kThreads)
layernorm_simple_kernel(const float* __restrict__ x, const float* __restrict__ w,
                        const float* __restrict__ b, float* __restrict__ y, int64_t H,
                        float eps) {
  __shared__ float red[kThreads];
  const int tid = threadIdx.x;
  const float* xr = x + (int64_t)blockIdx.x * H;
  float* yr = y + (int64_t)blockIdx.x * H;

  float s = 0.f;
  for (int64_t i = tid; i < H; i += kThreads) s += xr[i];
  const float mean = block_sum(s, red) / (float)H;

  float sq = 0.f;
  for (int64_t i = tid; i < H; i += kThreads) {
    const float d = xr[i] - mean;
    sq += d * d;
  }
  const float var = block_sum(sq, red) / (float)H;
  const float rstd = 1.0f / sqrtf(var + eps);

  for (int64_t i = tid; i < H; i += kThreads) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
}

}  // namespace

torch::Tensor layernorm_simple_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                                       int64_t H, double eps) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "layernorm: tensors must be on CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                  b.scalar_type() == torch::kFloat32,
              "layernorm: x, weight and bias must be float32");
  TORCH_CHECK(x.device() == w.device() && x.device() == b.device(),
              "layernorm: tensors on different devices");
  TORCH_CHECK(H >= 1 && w.numel() == H && b.numel() == H,
              "layernorm: weight and bias must have prod(normalized_shape) elements");
  x = x.contiguous();
  w = w.contiguous();
  b = b.contiguous();
  const at::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  TORCH_CHECK(n % H == 0, "layernorm: input size is not a multiple of prod(normalized_shape)");
  const int64_t rows = n / H;
  TORCH_CHECK(rows <= (int64_t)INT_MAX, "layernorm: too many rows for one grid");
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  layernorm_simple_kernel<<<(unsigned int)rows, kThreads, 0, stream>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), H,
      (float)eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kbench_layernorm_simple_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["layernorm_simple_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """LayerNorm(normalized_shape) with random affine parameters, one CUDA block per row."""

    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        # Same module and same parameter initialisation (same generator draws, same order)
        # as the reference; it only holds weight, bias and eps.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():
            self.ln.weight.copy_(0.5 + torch.rand(self.ln.weight.shape))
            self.ln.bias.copy_(torch.rand(self.ln.bias.shape) - 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.ln
        nd = len(ln.normalized_shape)
        if tuple(x.shape[x.dim() - nd:]) != tuple(ln.normalized_shape):
            raise ValueError("layernorm: input does not end with normalized_shape")
        H = 1
        for d in ln.normalized_shape:
            H *= int(d)
        return _ext.layernorm_simple_forward(x.contiguous(), ln.weight.contiguous(),
                                             ln.bias.contiguous(), H, float(ln.eps))
