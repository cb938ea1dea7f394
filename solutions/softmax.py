"""Custom-CUDA solution for KernelBench level 1, problem 23 (23_Softmax).

y[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r))   for a 2-D x, softmax over dim 1,
never calling torch's softmax.

Numerics: an "online" softmax. Each thread keeps a running (max m, sum s of exp(x - m)); when a
new group of values raises the max, s is rescaled by exp(m_old - m_new). Partial (m, s) pairs
are merged with s = s1 * exp(m1 - M) + s2 * exp(m2 - M), M = max(m1, m2) (a scale of exactly 1
is used for the side that holds M, so rows of -inf never form -inf - -inf). Every exponent is
<= 0, so nothing overflows even for inputs scaled by 100. Sums are float32 over short per-
thread runs then a shuffle / shared-memory tree; the final write uses exp(x - M) * (1 / S).
__expf (ex2.approx) is used: relative error ~1e-6 for the arguments here, far inside 1e-4.

Two kernels, chosen by the row length:
  * dim <= 1024: one warp per row (8 rows per 256-thread block). Pass 1 reads the row and
    builds the lane's (m, s), merged with xor shuffles; pass 2 re-reads the row (L1-resident)
    and writes y.
  * dim > 1024: one 512-thread block per row. Pass 1 streams the row once (float4 loads when
    dim % 4 == 0 and the pointers are 16-byte aligned, scalar otherwise; 4 independent loads
    in flight per thread) building (m, s); a warp-shuffle + shared-memory reduction gives
    the row's (M, S); pass 2 re-reads the row and writes y with streaming stores.
  Traffic is 2 reads + 1 write of the tensor (the reference's classic kernel reads 3 times).

Row offsets are 64-bit (the official tensor has 1.61e9 elements). Zero-size inputs return
without launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor softmax_rows_forward(torch::Tensor x);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <math_constants.h>

namespace {

constexpr int kWarpBlock = 256;              // threads per block, warp-per-row kernel
constexpr int kRowsPerWarpBlock = kWarpBlock / 32;
constexpr int kMaxWarpDim = 1024;            // rows up to this length use one warp
constexpr int kRowBlock = 512;               // threads per block, block-per-row kernel
constexpr int kUnroll = 4;                   // independent loads in flight per thread

// Merge (m2, s2) into (m, s).
__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  const float a = (m == M) ? s : s * __expf(m - M);
  const float b = (m2 == M) ? s2 : s2 * __expf(m2 - M);
  m = M;
  s = a + b;
}

__device__ __forceinline__ void warp_merge_all(float& m, float& s) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    ms_merge(m, s, m2, s2);
  }
}

// ---------------------------------------------------------------- one warp per row
__global__ void __launch_bounds__(kWarpBlock)
softmax_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int dim) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * kRowsPerWarpBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warp leaves together
  const float* __restrict__ xr = x + row * (int64_t)dim;
  float* __restrict__ yr = y + row * (int64_t)dim;

  float m = -CUDART_INF_F, s = 0.f;
  for (int i = lane; i < dim; i += 32) {
    const float v = xr[i];
    if (v > m) {
      s = s * __expf(m - v) + 1.f;
      m = v;
    } else {
      s += __expf(v - m);
    }
  }
  warp_merge_all(m, s);
  const float inv = 1.f / s;
  for (int i = lane; i < dim; i += 32) yr[i] = __expf(xr[i] - m) * inv;
}

// ---------------------------------------------------------------- one block per row
template <bool VEC>
__global__ void __launch_bounds__(kRowBlock, 2)
softmax_block_kernel(const float* __restrict__ x, float* __restrict__ y, int dim) {
  __shared__ float sm_m[kRowBlock / 32];
  __shared__ float sm_s[kRowBlock / 32];
  __shared__ float row_ms[2];

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int64_t row = blockIdx.x;
  const float* __restrict__ xr = x + row * (int64_t)dim;
  float* __restrict__ yr = y + row * (int64_t)dim;

  float m = -CUDART_INF_F, s = 0.f;
  if constexpr (VEC) {
    const int n4 = dim >> 2;
    const float4* __restrict__ xv = reinterpret_cast<const float4*>(xr);
    for (int base = tid; base < n4; base += kRowBlock * kUnroll) {
      float4 v[kUnroll];
      bool ok[kUnroll];
      float lm = -CUDART_INF_F;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kRowBlock;
        ok[u] = i < n4;
        if (ok[u]) {
          v[u] = __ldg(xv + i);
          lm = fmaxf(lm, fmaxf(fmaxf(v[u].x, v[u].y), fmaxf(v[u].z, v[u].w)));
        }
      }
      if (lm > m) {
        s *= __expf(m - lm);
        m = lm;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (ok[u]) {
          s += (__expf(v[u].x - m) + __expf(v[u].y - m)) + (__expf(v[u].z - m) + __expf(v[u].w - m));
        }
      }
    }
  } else {
    for (int base = tid; base < dim; base += kRowBlock * kUnroll) {
      float v[kUnroll];
      bool ok[kUnroll];
      float lm = -CUDART_INF_F;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kRowBlock;
        ok[u] = i < dim;
        if (ok[u]) {
          v[u] = __ldg(xr + i);
          lm = fmaxf(lm, v[u]);
        }
      }
      if (lm > m) {
        s *= __expf(m - lm);
        m = lm;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (ok[u]) s += __expf(v[u] - m);
      }
    }
  }

  // Block-wide merge of (m, s).
  warp_merge_all(m, s);
  if (lane == 0) {
    sm_m[warp] = m;
    sm_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    constexpr int kWarps = kRowBlock / 32;
    float mm = lane < kWarps ? sm_m[lane] : -CUDART_INF_F;
    float ss = lane < kWarps ? sm_s[lane] : 0.f;
    warp_merge_all(mm, ss);
    if (lane == 0) {
      row_ms[0] = mm;
      row_ms[1] = ss;
    }
  }
  __syncthreads();
  const float M = row_ms[0];
  const float inv = 1.f / row_ms[1];

  if constexpr (VEC) {
    const int n4 = dim >> 2;
    const float4* __restrict__ xv = reinterpret_cast<const float4*>(xr);
    float4* __restrict__ yv = reinterpret_cast<float4*>(yr);
    for (int base = tid; base < n4; base += kRowBlock * kUnroll) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kRowBlock;
        if (i < n4) v[u] = __ldcs(xv + i);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kRowBlock;
        if (i < n4) {
          float4 r;
          r.x = __expf(v[u].x - M) * inv;
          r.y = __expf(v[u].y - M) * inv;
          r.z = __expf(v[u].z - M) * inv;
          r.w = __expf(v[u].w - M) * inv;
          __stcs(yv + i, r);
        }
      }
    }
  } else {
    for (int base = tid; base < dim; base += kRowBlock * kUnroll) {
      float v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kRowBlock;
        if (i < dim) v[u] = __ldcs(xr + i);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kRowBlock;
        if (i < dim) __stcs(yr + i, __expf(v[u] - M) * inv);
      }
    }
  }
}

}  // namespace

torch::Tensor softmax_rows_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "softmax: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "softmax: x must be contiguous");
  TORCH_CHECK(x.dim() == 2, "softmax: x must be 2-D (batch, dim); softmax is over dim 1");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty(x.sizes(), x.options());
  const int64_t rows = x.size(0), dim = x.size(1);
  if (rows == 0 || dim == 0) return y;
  TORCH_CHECK(dim <= (int64_t)INT_MAX - (int64_t)kRowBlock * kUnroll * 4,
              "softmax: row length exceeds 32-bit range");

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();

  if (dim <= kMaxWarpDim) {
    const int64_t blocks = (rows + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock;
    TORCH_CHECK(blocks <= (int64_t)INT_MAX, "softmax: too many rows");
    softmax_warp_kernel<<<(unsigned int)blocks, kWarpBlock, 0, stream>>>(xp, yp, rows, (int)dim);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }

  TORCH_CHECK(rows <= (int64_t)INT_MAX, "softmax: too many rows");
  const bool vec = (dim % 4 == 0) && (reinterpret_cast<uintptr_t>(xp) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
  if (vec) {
    softmax_block_kernel<true><<<(unsigned int)rows, kRowBlock, 0, stream>>>(xp, yp, (int)dim);
  } else {
    softmax_block_kernel<false><<<(unsigned int)rows, kRowBlock, 0, stream>>>(xp, yp, (int)dim);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kbench_softmax_online_rows_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["softmax_rows_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = softmax(x, dim=1) computed by a custom CUDA online-softmax kernel."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_rows_forward(x.contiguous())
