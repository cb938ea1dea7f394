"""Custom-CUDA solution for the LayerNorm problem (adapted from KernelBench level 1, 40).

y = (x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape dims
(biased variance, exactly nn.LayerNorm's definition), never calling torch's layer_norm.

ModelNew builds the same nn.LayerNorm as the reference Model (attribute `ln`) and fills its
weight with 0.5 + rand and then its bias with rand - 0.5, in the same order from the default
generator, so seeded construction gives identical parameters; the module is only a parameter
container (weight, bias, eps).

x is viewed as (rows, H) with H = prod(normalized_shape). Statistics are two-pass in float32:
mean = sum(x) / H, then var = sum((x - mean)^2) / H over the same values (no E[x^2] - mean^2
cancellation); every sum is a short per-thread run followed by a warp-shuffle / shared-memory
tree.

  * H <= 1024: one warp per row (8 rows per 256-thread block); the three passes (sum, squared
    deviations, write) re-read the row, which stays in L1.
  * H > 1024: one 256-thread block per row. If the row fits in 48 KB of shared memory
    (H <= 12288, the official H = 8192 uses 32 KB) it is read from global memory exactly once
    into shared memory (summing on the way), and both remaining passes run from shared
    memory, so the kernel moves the minimum 1 read + 1 write. Larger rows re-read global
    memory (L2) instead. float4 loads/stores are used when H % 4 == 0 and x, y, weight and
    bias are 16-byte aligned; scalar otherwise. y uses streaming stores.

Row offsets are 64-bit (the official x has 1.07e9 elements). Zero-size inputs return without
launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t H,
                                double eps);
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

constexpr int kWarpBlock = 256;                 // threads per block, warp-per-row kernel
constexpr int kRowsPerWarpBlock = kWarpBlock / 32;
constexpr int kMaxWarpH = 1024;                 // rows up to this length use one warp
constexpr int kRowBlock = 256;                  // threads per block, block-per-row kernel
constexpr int kMaxCacheFloats = 12288;          // 48 KB: rows cached in shared memory

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block; every thread gets the result. `red` holds kRowBlock / 32 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (kRowBlock / 32) ? red[lane] : 0.f;
  return warp_sum(t);
}

// ---------------------------------------------------------------- one warp per row
__global__ void __launch_bounds__(kWarpBlock)
layernorm_warp_kernel(const float* __restrict__ x, const float* __restrict__ w,
                      const float* __restrict__ b, float* __restrict__ y, int64_t rows, int H,
                      float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * kRowsPerWarpBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warp leaves together
  const float* __restrict__ xr = x + row * (int64_t)H;
  float* __restrict__ yr = y + row * (int64_t)H;

  float s = 0.f;
  for (int i = lane; i < H; i += 32) s += xr[i];
  const float mean = warp_sum(s) / (float)H;
  float q = 0.f;
  for (int i = lane; i < H; i += 32) {
    const float d = xr[i] - mean;
    q = fmaf(d, d, q);
  }
  const float var = warp_sum(q) / (float)H;
  const float rstd = 1.f / sqrtf(var + eps);
  for (int i = lane; i < H; i += 32) {
    yr[i] = fmaf((xr[i] - mean) * rstd, __ldg(w + i), __ldg(b + i));
  }
}

// ---------------------------------------------------------------- one block per row
// VEC: float4 path (H % 4 == 0, aligned pointers). CACHE: row staged in dynamic shared memory.
template <bool VEC, bool CACHE>
__global__ void __launch_bounds__(kRowBlock)
layernorm_block_kernel(const float* __restrict__ x, const float* __restrict__ w,
                       const float* __restrict__ b, float* __restrict__ y, int H, float eps) {
  extern __shared__ __align__(16) float srow[];
  __shared__ float red[kRowBlock / 32];
  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x;
  const float* __restrict__ xr = x + row * (int64_t)H;
  float* __restrict__ yr = y + row * (int64_t)H;
  // Source of passes 2 and 3: shared memory when cached, else global (L2).
  const float* __restrict__ src = CACHE ? srow : xr;

  // Pass 1: sum (and stage into shared memory).
  float s = 0.f;
  if constexpr (VEC) {
    const int n4 = H >> 2;
    const float4* __restrict__ xv = reinterpret_cast<const float4*>(xr);
    float4* sv = reinterpret_cast<float4*>(srow);
#pragma unroll 4
    for (int i = tid; i < n4; i += kRowBlock) {
      const float4 v = CACHE ? __ldcs(xv + i) : __ldg(xv + i);
      if constexpr (CACHE) sv[i] = v;
      s += (v.x + v.y) + (v.z + v.w);
    }
  } else {
#pragma unroll 4
    for (int i = tid; i < H; i += kRowBlock) {
      const float v = CACHE ? __ldcs(xr + i) : __ldg(xr + i);
      if constexpr (CACHE) srow[i] = v;
      s += v;
    }
  }
  const float mean = block_sum(s, red) / (float)H;  // block_sum syncs: srow is complete

  // Pass 2: sum of squared deviations.
  float q = 0.f;
  if constexpr (VEC) {
    const int n4 = H >> 2;
    const float4* sv = reinterpret_cast<const float4*>(src);
#pragma unroll 4
    for (int i = tid; i < n4; i += kRowBlock) {
      const float4 v = sv[i];
      const float dx = v.x - mean, dy = v.y - mean, dz = v.z - mean, dw = v.w - mean;
      q += fmaf(dx, dx, dy * dy) + fmaf(dz, dz, dw * dw);
    }
  } else {
#pragma unroll 4
    for (int i = tid; i < H; i += kRowBlock) {
      const float d = src[i] - mean;
      q = fmaf(d, d, q);
    }
  }
  const float var = block_sum(q, red) / (float)H;
  const float rstd = 1.f / sqrtf(var + eps);

  // Pass 3: normalise, scale, shift.
  if constexpr (VEC) {
    const int n4 = H >> 2;
    const float4* sv = reinterpret_cast<const float4*>(src);
    const float4* __restrict__ wv = reinterpret_cast<const float4*>(w);
    const float4* __restrict__ bv = reinterpret_cast<const float4*>(b);
    float4* __restrict__ yv = reinterpret_cast<float4*>(yr);
#pragma unroll 4
    for (int i = tid; i < n4; i += kRowBlock) {
      const float4 v = sv[i];
      const float4 ww = __ldg(wv + i);
      const float4 bb = __ldg(bv + i);
      float4 r;
      r.x = fmaf((v.x - mean) * rstd, ww.x, bb.x);
      r.y = fmaf((v.y - mean) * rstd, ww.y, bb.y);
      r.z = fmaf((v.z - mean) * rstd, ww.z, bb.z);
      r.w = fmaf((v.w - mean) * rstd, ww.w, bb.w);
      __stcs(yv + i, r);
    }
  } else {
#pragma unroll 4
    for (int i = tid; i < H; i += kRowBlock) {
      __stcs(yr + i, fmaf((src[i] - mean) * rstd, __ldg(w + i), __ldg(b + i)));
    }
  }
}

template <bool VEC, bool CACHE>
void launch_block(const float* x, const float* w, const float* b, float* y, int64_t rows, int H,
                  float eps, cudaStream_t stream) {
  const size_t smem = CACHE ? (size_t)H * sizeof(float) : 0;
  layernorm_block_kernel<VEC, CACHE><<<(unsigned int)rows, kRowBlock, smem, stream>>>(
      x, w, b, y, H, eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t H,
                                double eps) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "layernorm: tensors must be CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                  b.scalar_type() == torch::kFloat32,
              "layernorm: tensors must be float32");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(),
              "layernorm: tensors must be contiguous");
  TORCH_CHECK(x.device() == w.device() && x.device() == b.device(),
              "layernorm: tensors on different devices");
  TORCH_CHECK(H >= 1 && w.numel() == H && b.numel() == H,
              "layernorm: weight/bias must have prod(normalized_shape) elements");
  TORCH_CHECK(x.numel() % H == 0, "layernorm: input does not end with normalized_shape");
  TORCH_CHECK(H <= (int64_t)INT_MAX - 4 * kRowBlock, "layernorm: row length exceeds 32-bit range");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / H;

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int iH = (int)H;
  const float feps = (float)eps;

  if (H <= kMaxWarpH) {
    const int64_t blocks = (rows + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock;
    TORCH_CHECK(blocks <= (int64_t)INT_MAX, "layernorm: too many rows");
    layernorm_warp_kernel<<<(unsigned int)blocks, kWarpBlock, 0, stream>>>(xp, wp, bp, yp, rows,
                                                                           iH, feps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }

  TORCH_CHECK(rows <= (int64_t)INT_MAX, "layernorm: too many rows");
  const bool vec = (H % 4 == 0) && aligned16(xp) && aligned16(yp) && aligned16(wp) &&
                   aligned16(bp);
  const bool cache = H <= kMaxCacheFloats;
  if (vec) {
    if (cache) launch_block<true, true>(xp, wp, bp, yp, rows, iH, feps, stream);
    else launch_block<true, false>(xp, wp, bp, yp, rows, iH, feps, stream);
  } else {
    if (cache) launch_block<false, true>(xp, wp, bp, yp, rows, iH, feps, stream);
    else launch_block<false, false>(xp, wp, bp, yp, rows, iH, feps, stream);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_layernorm_rows_smem_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """LayerNorm(normalized_shape) with random affine parameters, custom CUDA forward."""

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
        H = 1
        for d in ln.normalized_shape:
            H *= int(d)
        nd = len(ln.normalized_shape)
        if tuple(x.shape[x.dim() - nd:]) != tuple(ln.normalized_shape):
            raise ValueError("layernorm: input does not end with normalized_shape")
        return _ext.layernorm_forward(x.contiguous(), ln.weight.contiguous(),
                                      ln.bias.contiguous(), H, float(ln.eps))
