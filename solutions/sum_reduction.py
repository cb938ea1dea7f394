"""Custom-CUDA solution for KernelBench level 1, problem 47 (47_Sum_reduction_over_a_dimension).

y = x.sum(dim, keepdim=True) for a float32 tensor of any rank and any (possibly negative) dim,
never calling torch's sum. x is viewed as (O, R, I): O = product of the sizes before dim,
R = size of dim (reduced), I = product of the sizes after dim; y is (O, I) laid out as the
keepdim shape.

Accuracy: every thread adds small groups of loaded values (8 or 16) as a float32 tree, then
adds each group's partial into a float64 running total; totals are combined across threads
in float64 (shuffles / shared memory) and rounded to float32 once. No float32 serial chain is
longer than one group, so even the official 4096-term sums (and much longer rows) are
accurate to ~1 ulp; no atomics, so the result is deterministic. The float64 work is one
add per 8-16 elements, hidden under the memory traffic.

  * I > 1 (reducing a non-innermost dim; the official case: (128, 4096, 4095), dim 1):
    column kernel. A 256-thread block is 32 columns x 8 row-lanes; block b owns outer index
    o = b / ceil(I/32) and 32 consecutive columns. Each warp reads 32 consecutive floats of
    one row (128-byte coalesced requests), each thread walks rows r = ty, ty+8, ... with 8
    independent loads in flight, and the 8 row-lanes are combined through shared memory.
    Official size: 16384 blocks, each thread sums 512 values.
  * I == 1 (reducing the innermost dim): row kernel. Rows shorter than 8192 use one warp per
    row (8 rows per block), longer rows one 256-thread block per row; float4 loads when
    R % 4 == 0 and x is 16-byte aligned, scalar otherwise.

All index math is 64-bit (the official x has 2.147e9 elements, just under 2^31). A zero-size
output returns without launching; an empty reduced dim gives zeros.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);
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

constexpr int kColX = 32;                 // columns per block (column kernel)
constexpr int kColY = 8;                  // row-lanes per block (column kernel)
constexpr int kColU = 8;                  // loads in flight per thread (column kernel)
constexpr int kWarpBlock = 256;           // threads per block (warp-per-row kernel)
constexpr int kRowsPerWarpBlock = kWarpBlock / 32;
constexpr int kRowBlock = 256;            // threads per block (block-per-row kernel)
constexpr int64_t kMaxWarpRow = 8192;     // rows shorter than this use one warp

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// Partial sum of one thread over a contiguous row segment: elements i = start, start+step, ...
// (in float4 units when VEC). Groups of U loads are tree-summed in float, groups into double.
template <bool VEC, int U>
__device__ __forceinline__ double row_partial(const float* __restrict__ xr, int64_t n,
                                              int64_t start, int64_t step) {
  double tot = 0.0;
  if constexpr (VEC) {
    const float4* __restrict__ xv = reinterpret_cast<const float4*>(xr);
    const int64_t n4 = n >> 2;
    for (int64_t base = start; base < n4; base += step * U) {
      float p[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t i = base + (int64_t)u * step;
        p[u] = i < n4 ? sum4(__ldcs(xv + i)) : 0.f;
      }
#pragma unroll
      for (int w = U / 2; w > 0; w >>= 1)
#pragma unroll
        for (int u = 0; u < w; ++u) p[u] += p[u + w];
      tot += (double)p[0];
    }
  } else {
    for (int64_t base = start; base < n; base += step * U) {
      float p[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t i = base + (int64_t)u * step;
        p[u] = i < n ? __ldcs(xr + i) : 0.f;
      }
#pragma unroll
      for (int w = U / 2; w > 0; w >>= 1)
#pragma unroll
        for (int u = 0; u < w; ++u) p[u] += p[u + w];
      tot += (double)p[0];
    }
  }
  return tot;
}

// ---------------------------------------------------------------- column kernel (I > 1)
__global__ void __launch_bounds__(kColX * kColY)
sum_cols_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R, int64_t I,
                int64_t ctiles) {
  __shared__ double part[kColY][kColX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t bid = blockIdx.x;
  const int64_t o = bid / ctiles;
  const int64_t c = (bid - o * ctiles) * kColX + tx;

  double tot = 0.0;
  if (c < I) {
    const float* __restrict__ p = x + o * R * I + c;
    int64_t r = ty;
    for (; r + (int64_t)(kColU - 1) * kColY < R; r += (int64_t)kColU * kColY) {
      float v[kColU];
#pragma unroll
      for (int u = 0; u < kColU; ++u) v[u] = __ldcs(p + (r + (int64_t)u * kColY) * I);
#pragma unroll
      for (int w = kColU / 2; w > 0; w >>= 1)
#pragma unroll
        for (int u = 0; u < w; ++u) v[u] += v[u + w];
      tot += (double)v[0];
    }
    float t = 0.f;  // fewer than kColU values left for this thread
    for (; r < R; r += kColY) t += __ldcs(p + r * I);
    tot += (double)t;
  }
  part[ty][tx] = tot;
  __syncthreads();
  if (ty == 0 && c < I) {
    double t = 0.0;
#pragma unroll
    for (int j = 0; j < kColY; ++j) t += part[j][tx];
    y[o * I + c] = (float)t;
  }
}

// ---------------------------------------------------------------- row kernels (I == 1)
template <bool VEC>
__global__ void __launch_bounds__(kWarpBlock)
sum_rows_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t R) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * kRowsPerWarpBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warp leaves together
  double tot = row_partial<VEC, VEC ? 4 : 8>(x + row * R, R, lane, 32);
  if constexpr (VEC) {
    if (lane == 0) {  // the R % 4 tail (empty when VEC is chosen, kept for safety)
      for (int64_t i = (R >> 2) << 2; i < R; ++i) tot += (double)x[row * R + i];
    }
  }
  tot = warp_sum_d(tot);
  if (lane == 0) y[row] = (float)tot;
}

template <bool VEC>
__global__ void __launch_bounds__(kRowBlock)
sum_rows_block_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R) {
  __shared__ double red[kRowBlock / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t row = blockIdx.x;
  double tot = row_partial<VEC, VEC ? 4 : 8>(x + row * R, R, tid, kRowBlock);
  if constexpr (VEC) {
    if (tid == 0) {
      for (int64_t i = (R >> 2) << 2; i < R; ++i) tot += (double)x[row * R + i];
    }
  }
  tot = warp_sum_d(tot);
  if (lane == 0) red[warp] = tot;
  __syncthreads();
  if (warp == 0) {
    double t = lane < (kRowBlock / 32) ? red[lane] : 0.0;
    t = warp_sum_d(t);
    if (lane == 0) y[row] = (float)t;
  }
}

}  // namespace

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
  TORCH_CHECK(x.is_cuda(), "sum: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "sum: x must be contiguous");
  const int64_t nd = x.dim();
  TORCH_CHECK(nd >= 1, "sum: x must have at least one dimension");
  if (dim < 0) dim += nd;
  TORCH_CHECK(dim >= 0 && dim < nd, "sum: dim out of range");

  int64_t O = 1, I = 1;
  for (int64_t d = 0; d < dim; ++d) O *= x.size(d);
  for (int64_t d = dim + 1; d < nd; ++d) I *= x.size(d);
  const int64_t R = x.size(dim);
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes[dim] = 1;

  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty(out_sizes, x.options());
  if (y.numel() == 0) return y;
  if (R == 0) {
    y.zero_();
    return y;
  }

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();

  if (I > 1) {
    const int64_t ctiles = (I + kColX - 1) / kColX;
    const int64_t blocks = O * ctiles;
    TORCH_CHECK(blocks <= (int64_t)INT_MAX, "sum: problem too large for grid");
    sum_cols_kernel<<<(unsigned int)blocks, dim3(kColX, kColY), 0, stream>>>(xp, yp, R, I, ctiles);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }

  const bool vec = (R % 4 == 0) && (reinterpret_cast<uintptr_t>(xp) % 16 == 0);
  if (R < kMaxWarpRow) {
    const int64_t blocks = (O + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock;
    TORCH_CHECK(blocks <= (int64_t)INT_MAX, "sum: too many rows");
    if (vec) sum_rows_warp_kernel<true><<<(unsigned int)blocks, kWarpBlock, 0, stream>>>(xp, yp, O, R);
    else sum_rows_warp_kernel<false><<<(unsigned int)blocks, kWarpBlock, 0, stream>>>(xp, yp, O, R);
  } else {
    TORCH_CHECK(O <= (int64_t)INT_MAX, "sum: too many rows");
    if (vec) sum_rows_block_kernel<true><<<(unsigned int)O, kRowBlock, 0, stream>>>(xp, yp, R);
    else sum_rows_block_kernel<false><<<(unsigned int)O, kRowBlock, 0, stream>>>(xp, yp, R);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kbench_sum_reduction_dim_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = x.sum(dim, keepdim=True) computed by custom CUDA reduction kernels."""

    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x.contiguous(), int(self.dim))
