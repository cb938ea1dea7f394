"""Custom-CUDA solution for KernelBench level 1, problem 79
(conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__).

ModelNew holds the same nn.ConvTranspose1d as the reference Model (attribute
`conv1d_transpose`, same constructor signature (in, out, kernel_size, stride,
padding, dilation, bias) and creation order, so seeded init gives identical
parameters) and uses it only as a parameter container: forward calls a
hand-written gather kernel, never torch's convolution.

The kernel is the general gather kernel of solutions/convt1d_dilated/general.py
(stride, padding, output_padding, dilation, groups, optional bias, any sizes):

  y[n, oc, o] = bias[oc] + sum_{ic in group(oc)} sum_k
                x[n, ic, (o + pad - k*dil) / stride] * w[ic, oc % Cout_g, k]
  where a tap is used only when (o + pad - k*dil) >= 0, is divisible by
  stride and the quotient is < L_in.  L_out = (L_in-1)*s - 2p + d*(K-1) + op + 1.

Nothing in it assumes the official stride 2 / dilation 2 / padding 1 (where
every tap lands on an odd output, so even outputs are exactly zero, or the bias):
the divisibility test is done per output position and tap, so every stride,
padding, dilation and kernel size of the sweep takes the same code path.

Tiled path: a block of 128 threads owns (batch n, group g, a tile of OC_T
output channels of that group, 512 consecutive output positions). Each
thread accumulates OC_T channels x 4 positions (positions strided by the
block size so loads and stores are coalesced; the 4 positions of a thread
share one residue modulo 2, so with stride 2 a thread either has taps or
skips the whole tap loop). The block's weights [ic][k][OC_T] are staged in
shared memory in passes over input channels (as many as fit a 32 KB budget)
and read as broadcast float4s; the input-channel loop is unrolled
(kIcUnroll); the tap-validity / input-offset arithmetic is hoisted out of
the input-channel loop. Blocks are ordered with the output-channel tile
fastest so the blocks reading the same input tile run together and hit L2.
A plain one-thread-per-output kernel covers the (extreme) case where one
input channel's weights for even a single output channel would not fit in
shared memory. All global index math is 64-bit (the official output has
2.7e8 elements). A non-positive L_out is rejected (as torch does); a
zero-size output returns without launching.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor conv_transpose1d_forward(torch::Tensor x, torch::Tensor w,
                                       std::optional<torch::Tensor> bias,
                                       int64_t stride, int64_t padding,
                                       int64_t output_padding, int64_t dilation,
                                       int64_t groups);
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

constexpr int kThreads = 128;                 // threads per block (tiled path)
constexpr int kPos = 4;                       // output positions per thread
constexpr int kTile = kThreads * kPos;        // output positions per block
constexpr int kMaxSmemFloats = 8192;          // 32 KB of staged weights
constexpr int kMaxOcT = 16;                   // max output channels per thread (power of 2)
constexpr int kIcUnroll = 4;                  // unroll factor of the input-channel loop
constexpr int kIcChunkMax = 1 << 30;  // cap on input channels per staging pass (none:
                                      // smaller passes measured slower on H200)

template <int OC_T>
__device__ __forceinline__ void load_w(const float* __restrict__ s, float (&r)[OC_T]) {
  if constexpr (OC_T % 4 == 0) {
#pragma unroll
    for (int c = 0; c < OC_T; c += 4) {
      const float4 v = *reinterpret_cast<const float4*>(s + c);
      r[c] = v.x; r[c + 1] = v.y; r[c + 2] = v.z; r[c + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int c = 0; c < OC_T; ++c) r[c] = s[c];
  }
}

template <int OC_T>
__global__ void __launch_bounds__(kThreads)
convt1d_tiled_kernel(const float* __restrict__ x, const float* __restrict__ w,
                     const float* __restrict__ bias, float* __restrict__ y,
                     int Cin, int Lin, int Cout, int Lout, int K,
                     int stride, int pad, int dil, int groups,
                     int ic_chunk, int oc_tiles, int pos_tiles) {
  extern __shared__ __align__(16) float sw[];
  const int Cin_g = Cin / groups;
  const int Cout_g = Cout / groups;

  int64_t bid = blockIdx.x;
  const int oc_tile = (int)(bid % oc_tiles); bid /= oc_tiles;
  const int g = (int)(bid % groups);         bid /= groups;
  const int pt = (int)(bid % pos_tiles);     bid /= pos_tiles;
  const int64_t n = bid;

  const int tid = threadIdx.x;
  const int ocg0 = oc_tile * OC_T;
  const int o_base = pt * kTile + tid;

  const float* __restrict__ xg = x + (n * Cin + (int64_t)g * Cin_g) * (int64_t)Lin;

  float acc[kPos][OC_T];
#pragma unroll
  for (int j = 0; j < kPos; ++j)
#pragma unroll
    for (int c = 0; c < OC_T; ++c) acc[j][c] = 0.f;

  const int per_ic = K * OC_T;
  for (int ic0 = 0; ic0 < Cin_g; ic0 += ic_chunk) {
    const int nic = min(ic_chunk, Cin_g - ic0);
    __syncthreads();  // previous chunk fully consumed
    // Stage w[g*Cin_g+ic0+icl][ocg0+c][k] -> sw[(icl*K + k)*OC_T + c].
    // For a fixed ic the (c, k) run is contiguous in global memory.
    const int total = nic * per_ic;
    for (int i = tid; i < total; i += kThreads) {
      const int icl = i / per_ic;
      const int r = i - icl * per_ic;
      const int c = r / K;
      const int k = r - c * K;
      const int ocg = ocg0 + c;
      float v = 0.f;
      if (ocg < Cout_g) {
        const int64_t ic = (int64_t)g * Cin_g + ic0 + icl;
        v = __ldg(w + (ic * Cout_g + ocg) * (int64_t)K + k);
      }
      sw[(icl * K + k) * OC_T + c] = v;
    }
    __syncthreads();

    const float* __restrict__ xc = xg + (int64_t)ic0 * Lin;
    for (int k = 0; k < K; ++k) {
      int off[kPos];
      bool any = false;
#pragma unroll
      for (int j = 0; j < kPos; ++j) {
        const int o = o_base + j * kThreads;
        const int t = o + pad - k * dil;
        int ii = -1;
        if (o < Lout && t >= 0) {
          const int q = t / stride;
          if (q * stride == t && q < Lin) ii = q;
        }
        off[j] = ii;
        any |= (ii >= 0);
      }
      if (!any) continue;
      const float* swk = sw + k * OC_T;
#pragma unroll kIcUnroll
      for (int icl = 0; icl < nic; ++icl) {
        float wr[OC_T];
        load_w<OC_T>(swk + icl * per_ic, wr);
        const float* __restrict__ xr = xc + (int64_t)icl * Lin;
#pragma unroll
        for (int j = 0; j < kPos; ++j) {
          const float xv = off[j] >= 0 ? __ldg(xr + off[j]) : 0.f;
#pragma unroll
          for (int c = 0; c < OC_T; ++c) acc[j][c] = fmaf(xv, wr[c], acc[j][c]);
        }
      }
    }
  }

#pragma unroll
  for (int c = 0; c < OC_T; ++c) {
    const int ocg = ocg0 + c;
    if (ocg < Cout_g) {
      const int oc = g * Cout_g + ocg;
      const float b = bias != nullptr ? __ldg(bias + oc) : 0.f;
      float* __restrict__ yr = y + (n * Cout + oc) * (int64_t)Lout;
#pragma unroll
      for (int j = 0; j < kPos; ++j) {
        const int o = o_base + j * kThreads;
        if (o < Lout) yr[o] = acc[j][c] + b;
      }
    }
  }
}

// Fallback: one thread per output element, grid-stride, no shared memory.
__global__ void convt1d_simple_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ y,
                                      int64_t N, int Cin, int Lin, int Cout, int Lout, int K,
                                      int stride, int pad, int dil, int groups) {
  const int Cin_g = Cin / groups;
  const int Cout_g = Cout / groups;
  const int64_t total = N * Cout * (int64_t)Lout;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int o = (int)(idx % Lout);
    const int64_t r = idx / Lout;
    const int oc = (int)(r % Cout);
    const int64_t n = r / Cout;
    const int g = oc / Cout_g;
    const int ocg = oc - g * Cout_g;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
      const int t = o + pad - k * dil;
      if (t < 0) continue;
      const int q = t / stride;
      if (q * stride != t || q >= Lin) continue;
      const float* xp = x + (n * Cin + (int64_t)g * Cin_g) * (int64_t)Lin + q;
      const float* wp = w + ((int64_t)g * Cin_g * Cout_g + ocg) * (int64_t)K + k;
      for (int ic = 0; ic < Cin_g; ++ic)
        acc = fmaf(__ldg(xp + (int64_t)ic * Lin), __ldg(wp + (int64_t)ic * Cout_g * K), acc);
    }
    if (bias != nullptr) acc += __ldg(bias + oc);
    y[idx] = acc;
  }
}

template <int OC_T>
void launch_tiled(const float* x, const float* w, const float* b, float* y, int64_t N,
                  int Cin, int Lin, int Cout, int Lout, int K, int stride, int pad, int dil,
                  int groups, cudaStream_t stream) {
  const int Cin_g = Cin / groups;
  const int Cout_g = Cout / groups;
  const int per_ic = K * OC_T;
  const int ic_chunk =
      std::max(1, std::min(std::min(Cin_g, kIcChunkMax), kMaxSmemFloats / per_ic));
  const int oc_tiles = (Cout_g + OC_T - 1) / OC_T;
  const int pos_tiles = (Lout + kTile - 1) / kTile;
  const int64_t blocks = N * (int64_t)pos_tiles * groups * oc_tiles;
  TORCH_CHECK(blocks <= (int64_t)INT_MAX, "conv_transpose1d: problem too large for grid");
  const size_t smem = (size_t)ic_chunk * per_ic * sizeof(float);
  convt1d_tiled_kernel<OC_T><<<(unsigned int)blocks, kThreads, smem, stream>>>(
      x, w, b, y, Cin, Lin, Cout, Lout, K, stride, pad, dil, groups, ic_chunk, oc_tiles,
      pos_tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Launch the tiled kernel with the largest power-of-two OC_T <= oc_t.
template <int OC_T>
void dispatch_tiled(int oc_t, const float* x, const float* w, const float* b, float* y, int64_t N,
                    int Cin, int Lin, int Cout, int Lout, int K, int stride, int pad, int dil,
                    int groups, cudaStream_t stream) {
  if constexpr (OC_T > 1) {
    if (oc_t < OC_T) {
      dispatch_tiled<OC_T / 2>(oc_t, x, w, b, y, N, Cin, Lin, Cout, Lout, K, stride, pad, dil, groups, stream);
      return;
    }
  }
  launch_tiled<OC_T>(x, w, b, y, N, Cin, Lin, Cout, Lout, K, stride, pad, dil, groups, stream);
}

}  // namespace

torch::Tensor conv_transpose1d_forward(torch::Tensor x, torch::Tensor w,
                                       std::optional<torch::Tensor> bias,
                                       int64_t stride, int64_t padding,
                                       int64_t output_padding, int64_t dilation,
                                       int64_t groups) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "conv_transpose1d: x and weight must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "conv_transpose1d: x and weight must be float32");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous(),
              "conv_transpose1d: x and weight must be contiguous");
  TORCH_CHECK(x.dim() == 3, "conv_transpose1d: x must be (N, C_in, L)");
  TORCH_CHECK(w.dim() == 3, "conv_transpose1d: weight must be (C_in, C_out/groups, K)");
  TORCH_CHECK(x.device() == w.device(), "conv_transpose1d: x and weight on different devices");
  TORCH_CHECK(stride >= 1 && dilation >= 1 && padding >= 0 && output_padding >= 0 && groups >= 1,
              "conv_transpose1d: invalid stride/padding/output_padding/dilation/groups");
  TORCH_CHECK(output_padding < stride || output_padding < dilation,
              "conv_transpose1d: output padding must be smaller than either stride or dilation");

  const int64_t N = x.size(0), Cin = x.size(1), Lin = x.size(2);
  const int64_t K = w.size(2);
  TORCH_CHECK(w.size(0) == Cin, "conv_transpose1d: weight.size(0) must equal C_in");
  TORCH_CHECK(Cin % groups == 0, "conv_transpose1d: C_in must be divisible by groups");
  TORCH_CHECK(K >= 1, "conv_transpose1d: kernel size must be >= 1");
  const int64_t Cout = w.size(1) * groups;
  const int64_t Lout = (Lin - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1;
  TORCH_CHECK(Lout > 0, "conv_transpose1d: non-positive output length");
  TORCH_CHECK(Lout + padding + (int64_t)kTile < INT_MAX && Lin < INT_MAX && Cin < INT_MAX &&
                  Cout < INT_MAX && dilation * (K - 1) < INT_MAX && K * 16 < INT_MAX,
              "conv_transpose1d: a dimension exceeds 32-bit range");

  const float* bptr = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->is_cuda() && bias->scalar_type() == torch::kFloat32 && bias->is_contiguous(),
                "conv_transpose1d: bias must be a contiguous float32 CUDA tensor");
    TORCH_CHECK(bias->numel() == Cout, "conv_transpose1d: bias must have C_out elements");
    TORCH_CHECK(bias->device() == x.device(), "conv_transpose1d: bias on a different device");
    bptr = bias->data_ptr<float>();
  }

  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty({N, Cout, Lout}, x.options());
  if (y.numel() == 0) return y;
  if (Cin == 0) {  // empty reduction: output is just the bias
    if (bptr != nullptr) y.copy_(bias->view({1, Cout, 1}).expand({N, Cout, Lout}));
    else y.zero_();
    return y;
  }

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int Cout_g = (int)(Cout / groups);
  const int iCin = (int)Cin, iLin = (int)Lin, iCout = (int)Cout, iLout = (int)Lout, iK = (int)K;
  const int s = (int)stride, p = (int)padding, d = (int)dilation, G = (int)groups;

  // Output channels per thread: next power of two >= Cout_g, capped at kMaxOcT, and
  // shrunk until one input channel's weights fit the shared-memory budget.
  int oc_t = 1;
  while (oc_t < Cout_g && oc_t < kMaxOcT) oc_t *= 2;
  while (oc_t > 1 && (int64_t)K * oc_t > kMaxSmemFloats) oc_t /= 2;

  if ((int64_t)K * oc_t > kMaxSmemFloats) {
    const int64_t total = y.numel();
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 1 << 20);
    convt1d_simple_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(
        xp, wp, bptr, yp, N, iCin, iLin, iCout, iLout, iK, s, p, d, G);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }

  dispatch_tiled<kMaxOcT>(oc_t, xp, wp, bptr, yp, N, iCin, iLin, iCout, iLout, iK, s, p, d, G, stream);
  return y;
}
"""

_ext = load_inline(
    name="kbench_convt1d_strided_dilated_gather_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv_transpose1d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Strided, padded, dilated transposed 1D convolution computed by a custom CUDA gather kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super(ModelNew, self).__init__()
        # Same module as the reference: it only holds the parameters.
        self.conv1d_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.conv1d_transpose
        b = m.bias
        return _ext.conv_transpose1d_forward(
            x.contiguous(), m.weight.contiguous(), None if b is None else b.contiguous(),
            m.stride[0], m.padding[0], m.output_padding[0], m.dilation[0], m.groups)
