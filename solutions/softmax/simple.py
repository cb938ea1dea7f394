"""Simple custom-CUDA solution for KernelBench level 1, problem 23 (23_Softmax).

y[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r))   for a 2-D x, softmax over dim 1,
never calling torch's softmax.

A deliberately plain first-attempt kernel (the optimised one is solutions/softmax.py): one
256-thread block per row and three passes over the row, each a block-strided loop with scalar
float loads (consecutive threads read consecutive floats, so accesses are coalesced):
  1. each thread takes the max of its elements; a shared-memory tree reduction gives max_r;
  2. each thread sums expf(x - max_r) in float32; a shared-memory tree reduction gives S_r;
  3. each thread writes expf(x - max_r) / S_r.
Subtracting the row max keeps every exponent <= 0, so inputs scaled by 100 cannot overflow.
Float32 partial sums over <= dim/256 terms followed by a tree keep the error ~1e-7.
Traffic is 3 reads + 1 write of the tensor (rows of the official 393216 floats do not stay in
cache between passes). Row offsets are 64-bit (the official tensor has 1.61e9 elements).
Zero-size inputs return without launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor softmax_simple_forward(torch::Tensor x);
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

__global__ void __launch_bounds__(kThreads)
softmax_simple_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t dim) {
  __shared__ float red[kThreads];
  const int tid = threadIdx.x;
  const float* xr = x + (int64_t)blockIdx.x * dim;
  float* yr = y + (int64_t)blockIdx.x * dim;

  // Pass 1: row max.
  float m = -INFINITY;
  for (int64_t i = tid; i < dim; i += kThreads) m = fmaxf(m, xr[i]);
  red[tid] = m;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  const float row_max = red[0];
  __syncthreads();  // everyone has read red[0] before it is reused

  // Pass 2: sum of exp(x - max).
  float sum = 0.f;
  for (int64_t i = tid; i < dim; i += kThreads) sum += expf(xr[i] - row_max);
  red[tid] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  const float row_sum = red[0];

  // Pass 3: normalised output.
  for (int64_t i = tid; i < dim; i += kThreads) yr[i] = expf(xr[i] - row_max) / row_sum;
}

}  // namespace

torch::Tensor softmax_simple_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "softmax: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax: x must be float32");
  TORCH_CHECK(x.dim() == 2, "softmax: x must be 2-D (softmax over dim 1)");
  x = x.contiguous();
  const at::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  const int64_t rows = x.size(0), dim = x.size(1);
  if (rows == 0 || dim == 0) return y;
  TORCH_CHECK(rows <= (int64_t)INT_MAX, "softmax: too many rows for one grid");
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  softmax_simple_kernel<<<(unsigned int)rows, kThreads, 0, stream>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), dim);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kbench_softmax_simple_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["softmax_simple_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = softmax(x, dim=1), one CUDA block per row with shared-memory tree reductions."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_simple_forward(x.contiguous())
