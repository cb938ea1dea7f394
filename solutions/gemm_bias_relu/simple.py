"""Simple custom-CUDA solution for KernelBench level 2, problem 76 (Gemm_Add_ReLU).

y = relu(x @ W^T + b) in one kernel, strict float32 (SIMT FFMA, fp32 accumulate; no TF32, no
tensor cores, no cuBLAS).

ModelNew creates exactly the reference's parameters in the same order (nn.Linear(in, out,
bias=False) as `gemm`, then nn.Parameter(torch.randn(bias_shape)) as `bias`), so seeded
construction gives identical weights; the Linear is only a parameter container.

Kernel: a textbook shared-memory tiled SGEMM in "NT" form (x is M x K, W is N x K, both
K-contiguous), with the bias add and ReLU applied to the accumulators before the single store.
  * A block of 16 x 16 = 256 threads computes a 64 (batch rows) x 64 (output features) tile;
    each thread owns a 4 x 4 register tile (rows ty*4 + {0..3}, features tx*4 + {0..3}), so
    every value read from shared memory feeds 4 FMAs.
  * K is walked in steps of 16. Per step the block copies the 64 x 16 tiles of x and W into
    shared memory with coalesced scalar loads (consecutive threads walk K), storing both
    transposed (k-major, rows padded to 68 floats: at most 2-way bank conflicts) so the
    compute loop reads a thread's 4 x values and 4 W values as one float4 each. Elements
    outside the matrices are stored as zeros, so any in_features (1, 5, 1000 ...) and edge
    tiles need no special path. No double buffering: two __syncthreads per K step.
  * Grid: x = batch tiles (fastest), y = feature tiles, so the few blocks that share a 64-row
    panel of W (the 268 MB operand) run together and W streams from DRAM about once.
  * Epilogue: v = acc + b[n]; y = max(v, 0); float4 stores when out_features % 4 == 0 and y
    is 16-byte aligned, else bounds-checked scalars.
All global offsets are 64-bit.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor gemm_bias_relu_simple(torch::Tensor x, torch::Tensor w, torch::Tensor b);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <climits>
#include <cstdint>

namespace {

constexpr int BM = 64, BN = 64, BK = 16;  // block tile and K step
constexpr int TM = 4, TN = 4;             // per-thread register tile
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
constexpr int kPad = 4;

__device__ __forceinline__ float bias_relu(float acc, float b) {
  const float v = acc + b;
  return v > 0.f ? v : 0.f;
}

__global__ void __launch_bounds__(kThreads)
gemm_nt_bias_relu(const float* __restrict__ X, const float* __restrict__ Wt,
                  const float* __restrict__ bias, float* __restrict__ Y,
                  int M, int N, int K, bool vec_store) {
  __shared__ __align__(16) float Xs[BK][BM + kPad];  // Xs[k][m] = X[m0 + m][k0 + k]
  __shared__ __align__(16) float Ws[BK][BN + kPad];  // Ws[k][n] = W[n0 + n][k0 + k]

  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN);
  const int ty = tid / (BN / TN);
  const int64_t m0 = (int64_t)blockIdx.x * BM;  // batch tiles vary fastest: the blocks that
  const int64_t n0 = (int64_t)blockIdx.y * BN;  // share a W panel run together

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int l = 0; l < (BM * BK) / kThreads; ++l) {
      const int e = tid + l * kThreads;
      const int r = e / BK, c = e % BK;  // r: row of the tile, c: k within the step
      const int gk = k0 + c;
      const int64_t gm = m0 + r;
      const int64_t gn = n0 + r;
      Xs[c][r] = (gm < M && gk < K) ? __ldg(X + gm * K + gk) : 0.f;
      Ws[c][r] = (gn < N && gk < K) ? __ldg(Wt + gn * K + gk) : 0.f;
    }
    __syncthreads();

#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(&Xs[k][ty * TM]);
      const float4 b = *reinterpret_cast<const float4*>(&Ws[k][tx * TN]);
      const float av[TM] = {a.x, a.y, a.z, a.w};
      const float bv[TN] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }

  const int64_t gn = n0 + tx * TN;
  float bv[TN];
#pragma unroll
  for (int j = 0; j < TN; ++j) bv[j] = (gn + j < N) ? __ldg(bias + gn + j) : 0.f;

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t gm = m0 + ty * TM + i;
    if (gm >= M) continue;
    float* yrow = Y + gm * N;
    if (vec_store) {  // N % 4 == 0: the 4 features are all inside or all outside
      if (gn < N)
        *reinterpret_cast<float4*>(yrow + gn) =
            make_float4(bias_relu(acc[i][0], bv[0]), bias_relu(acc[i][1], bv[1]),
                        bias_relu(acc[i][2], bv[2]), bias_relu(acc[i][3], bv[3]));
    } else {
#pragma unroll
      for (int j = 0; j < TN; ++j)
        if (gn + j < N) yrow[gn + j] = bias_relu(acc[i][j], bv[j]);
    }
  }
}

}  // namespace

torch::Tensor gemm_bias_relu_simple(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "gemm_bias_relu: tensors must be CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                  b.scalar_type() == torch::kFloat32,
              "gemm_bias_relu: tensors must be float32");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "gemm_bias_relu: x and W must be 2-D");
  TORCH_CHECK(x.size(1) == w.size(1), "gemm_bias_relu: in_features mismatch");
  TORCH_CHECK(b.numel() == w.size(0), "gemm_bias_relu: bias must have out_features elements");
  TORCH_CHECK(x.device() == w.device() && x.device() == b.device(),
              "gemm_bias_relu: tensors on different devices");
  x = x.contiguous();
  w = w.contiguous();
  b = b.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(M < INT_MAX - BM && N < INT_MAX - BN && K < INT_MAX - BK,
              "gemm_bias_relu: a dimension exceeds 32-bit range");

  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty({M, N}, x.options());
  if (y.numel() == 0) return y;

  const int64_t gx = (M + BM - 1) / BM, gy = (N + BN - 1) / BN;
  TORCH_CHECK(gy <= 65535 && gx <= INT_MAX, "gemm_bias_relu: problem too large for the grid");
  const bool vec_store = (N % 4 == 0) && (reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // K == 0 needs no special case: the K loop does not run and y = relu(b).
  gemm_nt_bias_relu<<<dim3((unsigned int)gx, (unsigned int)gy), kThreads, 0, stream>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
      (int)M, (int)N, (int)K, vec_store);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kbench_gemm_bias_relu_simple_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["gemm_bias_relu_simple"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """y = relu(x @ W^T + b) computed by one simple tiled custom CUDA kernel."""

    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        # Same parameters, same creation order as the reference Model.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu_simple(x.contiguous(), self.gemm.weight.contiguous(),
                                          self.bias.contiguous())
