"""Custom-CUDA solution for KernelBench level 2, problem 76 (Gemm_Add_ReLU).

y = relu(x @ W^T + b) in one kernel, strict float32 (SIMT FFMA, fp32 accumulate; no TF32).

ModelNew creates exactly the reference's parameters in the same order (nn.Linear(in, out,
bias=False) as `gemm`, then nn.Parameter(torch.randn(bias_shape)) as `bias`), so seeded
construction gives identical weights; the Linear is only a parameter container.

Kernel: an "NT" GEMM, both operands K-contiguous (x is M x K, W is N x K), with the bias add
and ReLU fused into the epilogue (no intermediate tensor, one output write).
  * Block tile 128 (batch rows) x 128 (output features), K step BK = 16, 256 threads, 8 x 8
    outputs per thread as 2 x 2 sub-tiles of 4 x 4 (rows ty*4+{0..3}, 64+ty*4+{0..3}; cols
    tx*4+{0..3}, 64+tx*4+{0..3}); a warp is 8 (tx) x 4 (ty) so each per-k fragment read is a
    single shared-memory wavefront of float4s.
  * Both tiles are read from global along K as float4s and stored transposed in shared
    memory ([BK][128+4], k-major) so the inner loop reads float4 fragments along M / N.
    Load assignment: a warp covers 16 rows x 2 float4s of K (one full 32-byte sector per
    row) and, with the +4 padding, its transposed stores hit 32 distinct banks.
  * Double-buffered shared memory with a register prefetch of the next K tile: one
    __syncthreads per K step.
  * Epilogue: v = acc + b[n]; y = v < 0 ? 0 : v, float4 stores when out_features % 4 == 0.
  * Vector path (template VEC) when in_features % 4 == 0 and x / W are 16-byte aligned;
    otherwise the same kernel does scalar, bounds-checked loads (in_features = 1, 5, ...).
    Out-of-range rows / k are zero-filled in shared memory.
  * Grid order: the 128-row batch tiles vary fastest, so the (few) blocks that share a
    128-row panel of W (the 268 MB operand) run together and W streams from DRAM about
    once, while x (32 MB) stays L2-resident.
All global offsets are 64-bit.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor gemm_bias_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <climits>
#include <cstdint>

namespace {

constexpr int TILE = 128;          // block tile (both M and N)
constexpr int BK = 16;             // K step
constexpr int ST = TILE + 4;       // padded stride of the k-major tiles
constexpr int kThreads = 256;

// Load assignment (per thread, 2 float4s per operand per K step):
//   row = (tid % 16) + 16 * (tid / 32), k = 4 * ((tid / 16) % 2 + 2 * p), p = 0, 1.
template <bool VEC>
__device__ __forceinline__ void load_panel(const float* __restrict__ src, int rows, int K,
                                           int r0, int k0, int row, int kq, float4 (&r)[2]) {
  const bool row_ok = (r0 + row) < rows;
  const float* __restrict__ p = src + (int64_t)(row_ok ? r0 + row : 0) * K;
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int k = k0 + kq + 8 * q;
    if (VEC) {
      r[q] = (row_ok && k < K) ? __ldg(reinterpret_cast<const float4*>(p + k))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      r[q].x = (row_ok && k + 0 < K) ? __ldg(p + k + 0) : 0.f;
      r[q].y = (row_ok && k + 1 < K) ? __ldg(p + k + 1) : 0.f;
      r[q].z = (row_ok && k + 2 < K) ? __ldg(p + k + 2) : 0.f;
      r[q].w = (row_ok && k + 3 < K) ? __ldg(p + k + 3) : 0.f;
    }
  }
}

__device__ __forceinline__ void store_panel(float (*S)[ST], int row, int kq, const float4 (&r)[2]) {
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int k = kq + 8 * q;
    S[k + 0][row] = r[q].x;
    S[k + 1][row] = r[q].y;
    S[k + 2][row] = r[q].z;
    S[k + 3][row] = r[q].w;
  }
}

template <bool VEC, bool VEC_OUT>
__global__ void __launch_bounds__(kThreads, 2)
gemm_nt_bias_relu_kernel(const float* __restrict__ X, const float* __restrict__ W,
                         const float* __restrict__ bias, float* __restrict__ Y,
                         int M, int N, int K, int tiles_m) {
  __shared__ __align__(16) float Xs[2][BK][ST];
  __shared__ __align__(16) float Ws[2][BK][ST];

  const int bm = blockIdx.x % tiles_m;
  const int bn = blockIdx.x / tiles_m;
  const int m0 = bm * TILE;
  const int n0 = bn * TILE;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int tx = (lane & 7) + 8 * (warp & 1);
  const int ty = (lane >> 3) + 4 * (warp >> 1);

  const int ld_row = (tid & 15) + 16 * (tid >> 5);
  const int ld_kq = 4 * ((tid >> 4) & 1);

  float4 rx[2], rw[2];
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  const int nk = (K + BK - 1) / BK;
  load_panel<VEC>(X, M, K, m0, 0, ld_row, ld_kq, rx);
  load_panel<VEC>(W, N, K, n0, 0, ld_row, ld_kq, rw);
  store_panel(Xs[0], ld_row, ld_kq, rx);
  store_panel(Ws[0], ld_row, ld_kq, rw);
  __syncthreads();

  for (int kt = 0; kt < nk; ++kt) {
    const int buf = kt & 1;
    const bool more = kt + 1 < nk;
    if (more) {
      load_panel<VEC>(X, M, K, m0, (kt + 1) * BK, ld_row, ld_kq, rx);
      load_panel<VEC>(W, N, K, n0, (kt + 1) * BK, ld_row, ld_kq, rw);
    }

#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&Xs[buf][k][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&Xs[buf][k][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Ws[buf][k][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Ws[buf][k][64 + tx * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }

    if (more) {
      store_panel(Xs[buf ^ 1], ld_row, ld_kq, rx);
      store_panel(Ws[buf ^ 1], ld_row, ld_kq, rw);
    }
    __syncthreads();
  }

  // Fused epilogue: + bias, ReLU (NaN-propagating like torch.relu).
  float bv[8];
  int cols[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    cols[h] = n0 + h * 64 + tx * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = cols[h] + j;
      bv[h * 4 + j] = c < N ? __ldg(bias + c) : 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int r = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
    if (r >= M) continue;
    float* __restrict__ yrow = Y + (int64_t)r * N;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float t = acc[i][h * 4 + j] + bv[h * 4 + j];
        v[j] = t < 0.f ? 0.f : t;
      }
      const int c = cols[h];
      if (VEC_OUT) {
        if (c < N) *reinterpret_cast<float4*>(yrow + c) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (c + j < N) yrow[c + j] = v[j];
      }
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <bool VEC, bool VEC_OUT>
void launch(const float* x, const float* w, const float* b, float* y, int M, int N, int K,
            int tiles_m, unsigned blocks, cudaStream_t stream) {
  gemm_nt_bias_relu_kernel<VEC, VEC_OUT><<<blocks, kThreads, 0, stream>>>(x, w, b, y, M, N, K, tiles_m);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

torch::Tensor gemm_bias_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "gemm_bias_relu: tensors must be CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                  b.scalar_type() == torch::kFloat32,
              "gemm_bias_relu: tensors must be float32");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "gemm_bias_relu: x and weight must be 2-D");
  TORCH_CHECK(x.size(1) == w.size(1), "gemm_bias_relu: in_features mismatch");
  TORCH_CHECK(b.numel() == w.size(0), "gemm_bias_relu: bias must have out_features elements");
  TORCH_CHECK(x.device() == w.device() && x.device() == b.device(),
              "gemm_bias_relu: tensors on different devices");
  const c10::cuda::CUDAGuard guard(x.device());
  x = x.contiguous();
  w = w.contiguous();
  b = b.contiguous();

  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(M < INT_MAX - TILE && N < INT_MAX - TILE && K < INT_MAX - BK,
              "gemm_bias_relu: a dimension exceeds 32-bit range");
  auto y = torch::empty({M, N}, x.options());
  if (y.numel() == 0) return y;
  if (K == 0) {  // empty reduction: relu(bias) broadcast over rows
    y.copy_(b.view({1, N}).expand({M, N}));
    y.clamp_min_(0.f);
    return y;
  }

  const int64_t tiles_m = (M + TILE - 1) / TILE;
  const int64_t tiles_n = (N + TILE - 1) / TILE;
  const int64_t blocks = tiles_m * tiles_n;
  TORCH_CHECK(blocks <= (int64_t)INT_MAX, "gemm_bias_relu: problem too large for grid");

  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool vec = (K % 4 == 0) && aligned16(xp) && aligned16(wp);
  const bool vec_out = (N % 4 == 0) && aligned16(yp);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const unsigned nb = (unsigned)blocks;
  if (vec) {
    if (vec_out) launch<true, true>(xp, wp, bp, yp, (int)M, (int)N, (int)K, (int)tiles_m, nb, stream);
    else launch<true, false>(xp, wp, bp, yp, (int)M, (int)N, (int)K, (int)tiles_m, nb, stream);
  } else {
    if (vec_out) launch<false, true>(xp, wp, bp, yp, (int)M, (int)N, (int)K, (int)tiles_m, nb, stream);
    else launch<false, false>(xp, wp, bp, yp, (int)M, (int)N, (int)K, (int)tiles_m, nb, stream);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_gemm_bias_relu_nt128",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["gemm_bias_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = relu(x @ W^T + b) computed by one fused custom CUDA GEMM kernel."""

    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        # Same parameters, same creation order as the reference Model.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu_forward(x.contiguous(), self.gemm.weight.contiguous(),
                                           self.bias.contiguous())
