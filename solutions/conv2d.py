"""Custom-CUDA solution for KernelBench level 1, problem 63
(conv_standard_2D__square_input__square_kernel).

ModelNew holds the same nn.Conv2d as the reference Model (attribute `conv2d`, same constructor
signature and creation order, so seeded init gives identical parameters) and uses it only as a
parameter container: forward calls a hand-written direct-convolution kernel, never torch's.

  y[n, oc, oh, ow] = bias[oc] + sum_{ic in group(oc)} sum_{kh, kw}
      x[n, ic, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] * W[oc, ic % Cin_g, kh, kw]
  (zero padding), H_out = (H + 2ph - dh*(KH-1) - 1) / sh + 1 (same for W).
General: any stride / padding / dilation / groups / bias, non-square kernels, any sizes.

Tiled path (strict float32 FMAs, no tensor cores): a block of 256 threads (8 warps) owns
(batch n, group g, a tile of OC_T output channels of that group, an output tile of 8 rows x 128
columns). Warp w computes output row w of the tile; lane l computes columns l, l+32, l+64,
l+96, for all OC_T channels (a 4 x OC_T register tile, OC_T up to 16: 64 accumulators). Per
chunk of input channels the block stages in shared memory (a) the input patch the tile needs,
zero-padded at the borders, so the inner loop has no bounds checks, and (b) the weights as
[ic][kh][kw][OC_T], read as broadcast float4s. Inner loop per (ic, kh, kw): 4 conflict-free
shared loads of x (lanes 1*sw apart) + OC_T/4 broadcast float4 weight loads feed 4*OC_T FMAs.
Chunks are sized to ~64 KB of shared memory (opt-in above 48 KB); blocks are ordered with the
output-channel tile fastest, so the blocks that read the same input patch run together and
hit L2. Stores are coalesced (a warp writes 32 consecutive columns). A plain one-thread-per-
output kernel covers the extreme case where one input channel's patch would not fit in shared
memory. All global index math is 64-bit.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> bias,
                             int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                             int64_t dil_h, int64_t dil_w, int64_t groups);
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

constexpr int kThreads = 256;               // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kTH = kWarps;                 // output rows per block (one per warp)
constexpr int kP = 4;                       // output columns per thread (32 apart)
constexpr int kTW = 32 * kP;                // output columns per block
constexpr int kMaxOcT = 16;                 // output channels per thread (power of 2)
constexpr int kBudgetFloats = 16384;        // target shared memory per block (64 KB)
constexpr int kMaxSmemFloats = 50 * 1024;   // hard cap (200 KB; H200 allows 227 KB)

struct Geom {
  int N, Cin, H, W, Cout, Ho, Wo, KH, KW;
  int sh, sw, ph, pw, dh, dw, groups;
  int IHT, IWT;      // staged input patch rows / columns per input channel
  int icc;           // input channels per staging chunk
  int oc_tiles, w_tiles, h_tiles;
};

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
__global__ void __launch_bounds__(kThreads, 2)
conv2d_tiled_kernel(const float* __restrict__ x, const float* __restrict__ w,
                    const float* __restrict__ bias, float* __restrict__ y, const Geom G) {
  extern __shared__ __align__(16) float sm[];
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int KK = G.KH * G.KW;
  const int w_per_ic = KK * OC_T;
  float* __restrict__ smw = sm;
  float* __restrict__ smx = sm + ((G.icc * w_per_ic + 3) & ~3);
  const int x_per_ic = G.IHT * G.IWT;

  int64_t bid = blockIdx.x;
  const int oc_tile = (int)(bid % G.oc_tiles); bid /= G.oc_tiles;
  const int wt = (int)(bid % G.w_tiles);       bid /= G.w_tiles;
  const int ht = (int)(bid % G.h_tiles);       bid /= G.h_tiles;
  const int g = (int)(bid % G.groups);         bid /= G.groups;
  const int64_t n = bid;

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int ocg0 = oc_tile * OC_T;
  const int oh0 = ht * kTH, ow0 = wt * kTW;
  const int ih0 = oh0 * G.sh - G.ph;
  const int iw0 = ow0 * G.sw - G.pw;
  const int64_t plane_in = (int64_t)G.H * G.W;
  const float* __restrict__ xg = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;
  const float* __restrict__ wg = w + ((int64_t)g * Cout_g + ocg0) * (int64_t)Cin_g * KK;

  float acc[kP][OC_T];
#pragma unroll
  for (int j = 0; j < kP; ++j)
#pragma unroll
    for (int c = 0; c < OC_T; ++c) acc[j][c] = 0.f;

  // This thread's first input element in the patch; its columns are 32*sw apart.
  const int xoff = warp * G.sh * G.IWT + lane * G.sw;
  const int jstep = 32 * G.sw;

  for (int ic0 = 0; ic0 < Cin_g; ic0 += G.icc) {
    const int nic = min(G.icc, Cin_g - ic0);
    __syncthreads();  // the previous chunk is fully consumed
    // Weights: smw[(icl*KK + tap)*OC_T + c] = W[g*Cout_g + ocg0 + c, ic0 + icl, tap].
    const int wtotal = nic * w_per_ic;
    for (int i = tid; i < wtotal; i += kThreads) {
      const int c = i % OC_T;
      const int rest = i / OC_T;
      const int icl = rest / KK;
      const int tap = rest - icl * KK;
      float v = 0.f;
      if (ocg0 + c < Cout_g) v = __ldg(wg + ((int64_t)c * Cin_g + ic0 + icl) * KK + tap);
      smw[i] = v;
    }
    // Input patch rows (zero outside the input): one warp per row, lanes along the columns.
    const int rows = nic * G.IHT;
    for (int row = warp; row < rows; row += kWarps) {
      const int icl = row / G.IHT;
      const int ih = ih0 + (row - icl * G.IHT);
      float* __restrict__ dst = smx + row * G.IWT;
      if (ih < 0 || ih >= G.H) {
        for (int c = lane; c < G.IWT; c += 32) dst[c] = 0.f;
      } else {
        const float* __restrict__ src = xg + (int64_t)(ic0 + icl) * plane_in + (int64_t)ih * G.W;
#pragma unroll 4
        for (int c = lane; c < G.IWT; c += 32) {
          const int iw = iw0 + c;
          dst[c] = (iw >= 0 && iw < G.W) ? __ldg(src + iw) : 0.f;
        }
      }
    }
    __syncthreads();

    for (int icl = 0; icl < nic; ++icl) {
      const float* __restrict__ xi = smx + icl * x_per_ic + xoff;
      const float* __restrict__ wi = smw + icl * w_per_ic;
      for (int kh = 0; kh < G.KH; ++kh) {
        const float* __restrict__ xr = xi + kh * G.dh * G.IWT;
        const float* __restrict__ wr = wi + kh * G.KW * OC_T;
        for (int kw = 0; kw < G.KW; ++kw) {
          const float* __restrict__ xk = xr + kw * G.dw;
          float xv[kP];
#pragma unroll
          for (int j = 0; j < kP; ++j) xv[j] = xk[j * jstep];
          float wv[OC_T];
          load_w<OC_T>(wr + kw * OC_T, wv);
#pragma unroll
          for (int j = 0; j < kP; ++j)
#pragma unroll
            for (int c = 0; c < OC_T; ++c) acc[j][c] = fmaf(xv[j], wv[c], acc[j][c]);
        }
      }
    }
  }

  const int oh = oh0 + warp;
  if (oh >= G.Ho) return;
#pragma unroll
  for (int c = 0; c < OC_T; ++c) {
    const int ocg = ocg0 + c;
    if (ocg < Cout_g) {
      const int oc = g * Cout_g + ocg;
      const float b = bias != nullptr ? __ldg(bias + oc) : 0.f;
      float* __restrict__ yr = y + ((n * G.Cout + oc) * G.Ho + oh) * (int64_t)G.Wo;
#pragma unroll
      for (int j = 0; j < kP; ++j) {
        const int ow = ow0 + lane + 32 * j;
        if (ow < G.Wo) yr[ow] = acc[j][c] + b;
      }
    }
  }
}

// Fallback: one thread per output element, grid-stride, no shared memory.
__global__ void conv2d_simple_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ bias, float* __restrict__ y,
                                     const Geom G) {
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int64_t plane_out = (int64_t)G.Ho * G.Wo;
  const int64_t plane_in = (int64_t)G.H * G.W;
  const int64_t total = (int64_t)G.N * G.Cout * plane_out;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t p = idx % plane_out;
    const int64_t r = idx / plane_out;
    const int oc = (int)(r % G.Cout);
    const int64_t n = r / G.Cout;
    const int oh = (int)(p / G.Wo);
    const int ow = (int)(p % G.Wo);
    const int g = oc / Cout_g;
    const float* xb = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;
    const float* wb = w + (int64_t)oc * Cin_g * G.KH * G.KW;
    float acc = 0.f;
    for (int kh = 0; kh < G.KH; ++kh) {
      const int ih = oh * G.sh - G.ph + kh * G.dh;
      if (ih < 0 || ih >= G.H) continue;
      for (int kw = 0; kw < G.KW; ++kw) {
        const int iw = ow * G.sw - G.pw + kw * G.dw;
        if (iw < 0 || iw >= G.W) continue;
        const float* xp = xb + (int64_t)ih * G.W + iw;
        const float* wp = wb + kh * G.KW + kw;
        for (int ic = 0; ic < Cin_g; ++ic)
          acc = fmaf(__ldg(xp + ic * plane_in), __ldg(wp + (int64_t)ic * G.KH * G.KW), acc);
      }
    }
    if (bias != nullptr) acc += __ldg(bias + oc);
    y[idx] = acc;
  }
}

template <int OC_T>
void launch_tiled(const float* x, const float* w, const float* b, float* y, Geom G,
                  cudaStream_t stream) {
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int64_t w_per_ic = (int64_t)G.KH * G.KW * OC_T;
  const int64_t x_per_ic = (int64_t)G.IHT * G.IWT;
  const int64_t per_ic = w_per_ic + x_per_ic;
  int icc = (int)std::max<int64_t>(1, std::min<int64_t>(Cin_g, kBudgetFloats / per_ic));
  const int nchunks = (Cin_g + icc - 1) / icc;
  icc = (Cin_g + nchunks - 1) / nchunks;  // balance the chunks
  G.icc = icc;
  G.oc_tiles = (Cout_g + OC_T - 1) / OC_T;
  G.w_tiles = (G.Wo + kTW - 1) / kTW;
  G.h_tiles = (G.Ho + kTH - 1) / kTH;
  const int64_t blocks =
      (int64_t)G.N * G.groups * G.h_tiles * (int64_t)G.w_tiles * G.oc_tiles;
  TORCH_CHECK(blocks <= (int64_t)INT_MAX, "conv2d: problem too large for the grid");
  const size_t smem = (size_t)(((icc * w_per_ic + 3) & ~int64_t(3)) + icc * x_per_ic) * sizeof(float);
  if (smem > 48 * 1024)
    C10_CUDA_CHECK(cudaFuncSetAttribute(conv2d_tiled_kernel<OC_T>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  conv2d_tiled_kernel<OC_T><<<(unsigned int)blocks, kThreads, smem, stream>>>(x, w, b, y, G);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Launch the tiled kernel with the largest power-of-two OC_T <= oc_t.
template <int OC_T>
void dispatch_tiled(int oc_t, const float* x, const float* w, const float* b, float* y,
                    const Geom& G, cudaStream_t stream) {
  if constexpr (OC_T > 1) {
    if (oc_t < OC_T) {
      dispatch_tiled<OC_T / 2>(oc_t, x, w, b, y, G, stream);
      return;
    }
  }
  launch_tiled<OC_T>(x, w, b, y, G, stream);
}

}  // namespace

torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> bias,
                             int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                             int64_t dil_h, int64_t dil_w, int64_t groups) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "conv2d: x and weight must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "conv2d: x and weight must be float32");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous(), "conv2d: x and weight must be contiguous");
  TORCH_CHECK(x.dim() == 4, "conv2d: x must be (N, C_in, H, W)");
  TORCH_CHECK(w.dim() == 4, "conv2d: weight must be (C_out, C_in/groups, KH, KW)");
  TORCH_CHECK(x.device() == w.device(), "conv2d: x and weight on different devices");
  TORCH_CHECK(stride_h >= 1 && stride_w >= 1 && dil_h >= 1 && dil_w >= 1 && pad_h >= 0 &&
                  pad_w >= 0 && groups >= 1,
              "conv2d: invalid stride/padding/dilation/groups");

  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = w.size(0), KH = w.size(2), KW = w.size(3);
  TORCH_CHECK(Cin % groups == 0 && Cout % groups == 0,
              "conv2d: channels must be divisible by groups");
  TORCH_CHECK(w.size(1) * groups == Cin, "conv2d: weight.size(1) * groups must equal C_in");
  TORCH_CHECK(KH >= 1 && KW >= 1, "conv2d: kernel size must be >= 1");
  const int64_t Ho = (H + 2 * pad_h - dil_h * (KH - 1) - 1) / stride_h + 1;
  const int64_t Wo = (W + 2 * pad_w - dil_w * (KW - 1) - 1) / stride_w + 1;
  TORCH_CHECK(H + 2 * pad_h - dil_h * (KH - 1) - 1 >= 0 && W + 2 * pad_w - dil_w * (KW - 1) - 1 >= 0,
              "conv2d: calculated output size is too small");
  const int64_t IHT = (int64_t)(kTH - 1) * stride_h + dil_h * (KH - 1) + 1;
  const int64_t IWT = (int64_t)(kTW - 1) * stride_w + dil_w * (KW - 1) + 1;
  TORCH_CHECK(H * W < INT_MAX && Ho * Wo < INT_MAX && H + 2 * pad_h < INT_MAX / 2 &&
                  W + 2 * pad_w < INT_MAX / 2 && Ho * stride_h < INT_MAX / 2 &&
                  Wo * stride_w < INT_MAX / 2 && IHT * IWT < INT_MAX / 64 &&
                  KH * KW * kMaxOcT < INT_MAX && Cin < INT_MAX && Cout < INT_MAX,
              "conv2d: a dimension exceeds 32-bit range");

  const float* bptr = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->is_cuda() && bias->scalar_type() == torch::kFloat32 && bias->is_contiguous(),
                "conv2d: bias must be a contiguous float32 CUDA tensor");
    TORCH_CHECK(bias->numel() == Cout, "conv2d: bias must have C_out elements");
    TORCH_CHECK(bias->device() == x.device(), "conv2d: bias on a different device");
    bptr = bias->data_ptr<float>();
  }

  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty({N, Cout, Ho, Wo}, x.options());
  if (y.numel() == 0) return y;
  if (Cin == 0) {  // empty reduction: the output is just the bias
    if (bptr != nullptr) y.copy_(bias->view({1, Cout, 1, 1}).expand({N, Cout, Ho, Wo}));
    else y.zero_();
    return y;
  }

  Geom G;
  G.N = (int)N; G.Cin = (int)Cin; G.H = (int)H; G.W = (int)W;
  G.Cout = (int)Cout; G.Ho = (int)Ho; G.Wo = (int)Wo; G.KH = (int)KH; G.KW = (int)KW;
  G.sh = (int)stride_h; G.sw = (int)stride_w; G.ph = (int)pad_h; G.pw = (int)pad_w;
  G.dh = (int)dil_h; G.dw = (int)dil_w; G.groups = (int)groups;
  G.IHT = (int)IHT; G.IWT = (int)IWT;
  G.icc = 1; G.oc_tiles = 1; G.w_tiles = 1; G.h_tiles = 1;
  TORCH_CHECK(N < INT_MAX, "conv2d: batch too large");

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int Cout_g = (int)(Cout / groups);

  // Output channels per thread: next power of two >= Cout_g, capped at kMaxOcT, shrunk until
  // one input channel's patch + weights fit the shared-memory cap.
  int oc_t = 1;
  while (oc_t < Cout_g && oc_t < kMaxOcT) oc_t *= 2;
  while (oc_t > 1 && IHT * IWT + KH * KW * oc_t + 4 > kMaxSmemFloats) oc_t /= 2;

  if (IHT * IWT + KH * KW * oc_t + 4 > kMaxSmemFloats) {
    const int64_t total = y.numel();
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 1 << 20);
    conv2d_simple_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(xp, wp, bptr, yp, G);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }
  dispatch_tiled<kMaxOcT>(oc_t, xp, wp, bptr, yp, G, stream);
  return y;
}
"""

_ext = load_inline(
    name="kbench_conv2d_direct_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv2d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, (tuple, list)) else (int(v), int(v))


class ModelNew(nn.Module):
    """2-D convolution computed by a custom CUDA direct-convolution kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False):
        super(ModelNew, self).__init__()
        # Same module as the reference: it only holds the parameters.
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size),
                                stride=stride, padding=padding, dilation=dilation, groups=groups,
                                bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.conv2d
        if isinstance(m.padding, str) or m.padding_mode != "zeros":
            raise NotImplementedError("conv2d kernel: only explicit zero padding is supported")
        sh, sw = _pair(m.stride)
        ph, pw = _pair(m.padding)
        dh, dw = _pair(m.dilation)
        b = m.bias
        return _ext.conv2d_forward(x.contiguous(), m.weight.contiguous(),
                                   None if b is None else b.contiguous(),
                                   sh, sw, ph, pw, dh, dw, m.groups)
