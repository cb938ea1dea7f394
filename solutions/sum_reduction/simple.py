"""Simple custom-CUDA solution for KernelBench level 1, problem 47 (47_Sum_reduction_over_a_dimension).

y = x.sum(dim, keepdim=True) for a float32 tensor of any rank and any (possibly negative) dim,
never calling torch's sum. x is viewed as (O, R, I): O = product of the sizes before dim,
R = size of dim (reduced), I = product of the sizes after dim; y is (O, I) laid out as the
keepdim shape.

A deliberately plain first-attempt design (the optimised one is solutions/sum_reduction.py),
two straightforward kernels:
  * I > 1 (reducing a non-innermost dim; the official case: (128, 4096, 4095), dim 1): one
    thread per output element (o, i), which walks the R values x[o, r, i] one after the other.
    Neighbouring threads own neighbouring i, so each step of a warp reads 32 consecutive floats
    (coalesced). Official size: 524160 threads, 4096 values each.
  * I == 1 (reducing the innermost dim): one 256-thread block per output, each thread sums a
    block-strided slice of the row, then a shared-memory tree reduction.
Every running sum is a float64 (one double add per loaded float, cheap next to the memory
traffic), rounded to float32 once, so long sums keep full float32 accuracy; no atomics, so the
result is deterministic. All index math is 64-bit (the official x has 2.147e9 elements). A
zero-size output returns without launching; an empty reduced dim gives zeros.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor sum_dim_simple_forward(torch::Tensor x, int64_t dim);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

namespace {

constexpr int kThreads = 256;  // power of two (tree reduction)

// y[o, i] = sum_r x[o, r, i]; one thread per output, grid-stride over the O*I outputs.
__global__ void sum_columns_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t O, int64_t R, int64_t I) {
  const int64_t total = O * I;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int64_t o = idx / I;
    const int64_t i = idx - o * I;
    const float* p = x + o * R * I + i;
    double acc = 0.0;
#pragma unroll 8
    for (int64_t r = 0; r < R; ++r) acc += (double)p[r * I];
    y[idx] = (float)acc;
  }
}

// y[o] = sum_r x[o, r]; one block per row, shared-memory tree reduction.
__global__ void __launch_bounds__(kThreads)
sum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R) {
  __shared__ double red[kThreads];
  const int tid = threadIdx.x;
  const float* xr = x + (int64_t)blockIdx.x * R;
  double acc = 0.0;
  for (int64_t r = tid; r < R; r += kThreads) acc += (double)xr[r];
  red[tid] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  if (tid == 0) y[blockIdx.x] = (float)red[0];
}

}  // namespace

torch::Tensor sum_dim_simple_forward(torch::Tensor x, int64_t dim) {
  TORCH_CHECK(x.is_cuda(), "sum: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum: x must be float32");
  x = x.contiguous();
  const int64_t nd = x.dim();
  TORCH_CHECK(nd >= 1, "sum: x must have at least one dimension");
  if (dim < 0) dim += nd;
  TORCH_CHECK(dim >= 0 && dim < nd, "sum: dim out of range");

  int64_t O = 1, I = 1;
  for (int64_t d = 0; d < dim; ++d) O *= x.size(d);
  for (int64_t d = dim + 1; d < nd; ++d) I *= x.size(d);
  const int64_t R = x.size(dim);
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape[dim] = 1;

  const at::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty(out_shape, x.options());
  if (y.numel() == 0) return y;
  if (R == 0) {  // empty sum
    y.zero_();
    return y;
  }
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  if (I > 1) {
    const int64_t total = O * I;
    const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, (int64_t)INT_MAX);
    sum_columns_kernel<<<(unsigned int)blocks, kThreads, 0, stream>>>(xp, yp, O, R, I);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    TORCH_CHECK(O <= (int64_t)INT_MAX, "sum: too many rows for one grid");
    sum_rows_kernel<<<(unsigned int)O, kThreads, 0, stream>>>(xp, yp, R);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_sum_reduction_simple_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["sum_dim_simple_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = x.sum(dim, keepdim=True): one CUDA thread per column or one block per row."""

    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_simple_forward(x.contiguous(), int(self.dim))
