"""Custom-CUDA solution for KernelBench level 1, problem 65
(conv_transposed_2D__square_input__asymmetric_kernel).

ModelNew holds the same nn.ConvTranspose2d as the reference Model (attribute
`conv_transpose2d`, same constructor signature and creation order, so seeded
init gives identical parameters) and uses it only as a parameter container:
forward calls a hand-written gather kernel, never torch's convolution.

Kernel (gather formulation, float32 in / float32 accumulate), general in 2D:
  y[n, oc, h, w] = bias[oc] + sum_{ic in group(oc)} sum_{kh, kw}
      x[n, ic, (h + ph - kh*dh) / sh, (w + pw - kw*dw) / sw] * W[ic, oc % Cout_g, kh, kw]
  where a tap is used only when both numerators are >= 0, divisible by their
  stride and the quotients are inside the input.
  H_out = (H_in-1)*sh - 2ph + dh*(KH-1) + oph + 1 (same for W).

Tiled path: a block of 128 threads owns (batch n, group g, a tile of OC_T
output channels of that group, 512 consecutive positions of the flattened
H_out*W_out plane). Each thread accumulates OC_T channels x 4 positions
(positions strided by the block size, so loads and stores are coalesced
along the last dimension). The block's weights [ic][kh*KW+kw][OC_T] are
staged in shared memory in passes over input channels (as many as fit a 32
KB budget) and read as broadcast float4s; the input-channel loop is unrolled
(kIcUnroll); the tap-validity / input-offset arithmetic is done once per tap
and hoisted out of the input-channel loop. Blocks are ordered with the
output-channel tile fastest so blocks reading the same input tile run
together and hit L2. A plain one-thread-per-output kernel covers the
(extreme) case where one input channel's weights for a single output channel
would not fit in shared memory. All global index math is 64-bit.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor conv_transpose2d_forward(torch::Tensor x, torch::Tensor w,
                                       std::optional<torch::Tensor> bias,
                                       int64_t stride_h, int64_t stride_w,
                                       int64_t pad_h, int64_t pad_w,
                                       int64_t out_pad_h, int64_t out_pad_w,
                                       int64_t dil_h, int64_t dil_w,
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
constexpr int kIcUnroll = 2;                  // unroll factor of the input-channel loop
constexpr int kIcChunkMax = 1 << 30;  // cap on input channels per staging pass (none:
                                      // smaller passes measured slower on H200)

struct Geom {
  int Cin, Hin, Win, Cout, Hout, Wout, KH, KW;
  int sh, sw, ph, pw, dh, dw, groups;
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
__global__ void __launch_bounds__(kThreads)
convt2d_tiled_kernel(const float* __restrict__ x, const float* __restrict__ w,
                     const float* __restrict__ bias, float* __restrict__ y, const Geom G,
                     int ic_chunk, int oc_tiles, int pos_tiles) {
  extern __shared__ __align__(16) float smw[];
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int KK = G.KH * G.KW;
  const int plane_out = G.Hout * G.Wout;
  const int64_t plane_in = (int64_t)G.Hin * G.Win;

  int64_t bid = blockIdx.x;
  const int oc_tile = (int)(bid % oc_tiles); bid /= oc_tiles;
  const int g = (int)(bid % G.groups);       bid /= G.groups;
  const int pt = (int)(bid % pos_tiles);     bid /= pos_tiles;
  const int64_t n = bid;

  const int tid = threadIdx.x;
  const int ocg0 = oc_tile * OC_T;
  const int p_base = pt * kTile + tid;

  // Output coordinates of this thread's positions (pv: inside the plane).
  int oh[kPos], ow[kPos];
  bool pv[kPos];
#pragma unroll
  for (int j = 0; j < kPos; ++j) {
    const int p = p_base + j * kThreads;
    pv[j] = p < plane_out;
    oh[j] = pv[j] ? p / G.Wout : 0;
    ow[j] = pv[j] ? p - oh[j] * G.Wout : 0;
  }

  const float* __restrict__ xg = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;

  float acc[kPos][OC_T];
#pragma unroll
  for (int j = 0; j < kPos; ++j)
#pragma unroll
    for (int c = 0; c < OC_T; ++c) acc[j][c] = 0.f;

  const int per_ic = KK * OC_T;
  for (int ic0 = 0; ic0 < Cin_g; ic0 += ic_chunk) {
    const int nic = min(ic_chunk, Cin_g - ic0);
    __syncthreads();  // previous chunk fully consumed
    // Stage W[g*Cin_g+ic0+icl][ocg0+c][tap] -> smw[(icl*KK + tap)*OC_T + c].
    const int total = nic * per_ic;
    for (int i = tid; i < total; i += kThreads) {
      const int icl = i / per_ic;
      const int r = i - icl * per_ic;
      const int c = r / KK;
      const int tap = r - c * KK;
      const int ocg = ocg0 + c;
      float v = 0.f;
      if (ocg < Cout_g) {
        const int64_t ic = (int64_t)g * Cin_g + ic0 + icl;
        v = __ldg(w + (ic * Cout_g + ocg) * (int64_t)KK + tap);
      }
      smw[(icl * KK + tap) * OC_T + c] = v;
    }
    __syncthreads();

    const float* __restrict__ xc = xg + (int64_t)ic0 * plane_in;
    for (int kh = 0; kh < G.KH; ++kh) {
      int rowoff[kPos];
      bool any_row = false;
#pragma unroll
      for (int j = 0; j < kPos; ++j) {
        const int t = oh[j] + G.ph - kh * G.dh;
        int ro = -1;
        if (pv[j] && t >= 0) {
          const int q = t / G.sh;
          if (q * G.sh == t && q < G.Hin) ro = q * G.Win;
        }
        rowoff[j] = ro;
        any_row |= (ro >= 0);
      }
      if (!any_row) continue;
      for (int kw = 0; kw < G.KW; ++kw) {
        int off[kPos];
        bool any = false;
#pragma unroll
        for (int j = 0; j < kPos; ++j) {
          const int t = ow[j] + G.pw - kw * G.dw;
          int o = -1;
          if (rowoff[j] >= 0 && t >= 0) {
            const int q = t / G.sw;
            if (q * G.sw == t && q < G.Win) o = rowoff[j] + q;
          }
          off[j] = o;
          any |= (o >= 0);
        }
        if (!any) continue;
        const float* swk = smw + (kh * G.KW + kw) * OC_T;
#pragma unroll kIcUnroll
        for (int icl = 0; icl < nic; ++icl) {
          float wr[OC_T];
          load_w<OC_T>(swk + icl * per_ic, wr);
          const float* __restrict__ xr = xc + (int64_t)icl * plane_in;
#pragma unroll
          for (int j = 0; j < kPos; ++j) {
            const float xv = off[j] >= 0 ? __ldg(xr + off[j]) : 0.f;
#pragma unroll
            for (int c = 0; c < OC_T; ++c) acc[j][c] = fmaf(xv, wr[c], acc[j][c]);
          }
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
      float* __restrict__ yr = y + (n * G.Cout + oc) * (int64_t)plane_out;
#pragma unroll
      for (int j = 0; j < kPos; ++j) {
        const int p = p_base + j * kThreads;
        if (p < plane_out) yr[p] = acc[j][c] + b;
      }
    }
  }
}

// Fallback: one thread per output element, grid-stride, no shared memory.
__global__ void convt2d_simple_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ y,
                                      int64_t N, const Geom G) {
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int KK = G.KH * G.KW;
  const int64_t plane_out = (int64_t)G.Hout * G.Wout;
  const int64_t plane_in = (int64_t)G.Hin * G.Win;
  const int64_t total = N * G.Cout * plane_out;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t p = idx % plane_out;
    const int64_t r = idx / plane_out;
    const int oc = (int)(r % G.Cout);
    const int64_t n = r / G.Cout;
    const int h = (int)(p / G.Wout);
    const int wo = (int)(p % G.Wout);
    const int g = oc / Cout_g;
    const int ocg = oc - g * Cout_g;
    const float* xb = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;
    const float* wb = w + ((int64_t)g * Cin_g * Cout_g + ocg) * (int64_t)KK;
    float acc = 0.f;
    for (int kh = 0; kh < G.KH; ++kh) {
      const int th = h + G.ph - kh * G.dh;
      if (th < 0) continue;
      const int ih = th / G.sh;
      if (ih * G.sh != th || ih >= G.Hin) continue;
      for (int kw = 0; kw < G.KW; ++kw) {
        const int tw = wo + G.pw - kw * G.dw;
        if (tw < 0) continue;
        const int iw = tw / G.sw;
        if (iw * G.sw != tw || iw >= G.Win) continue;
        const float* xp = xb + (int64_t)ih * G.Win + iw;
        const float* wp = wb + kh * G.KW + kw;
        for (int ic = 0; ic < Cin_g; ++ic)
          acc = fmaf(__ldg(xp + ic * plane_in), __ldg(wp + (int64_t)ic * Cout_g * KK), acc);
      }
    }
    if (bias != nullptr) acc += __ldg(bias + oc);
    y[idx] = acc;
  }
}

template <int OC_T>
void launch_tiled(const float* x, const float* w, const float* b, float* y, int64_t N,
                  const Geom& G, cudaStream_t stream) {
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int per_ic = G.KH * G.KW * OC_T;
  const int ic_chunk =
      std::max(1, std::min(std::min(Cin_g, kIcChunkMax), kMaxSmemFloats / per_ic));
  const int oc_tiles = (Cout_g + OC_T - 1) / OC_T;
  const int pos_tiles = (G.Hout * G.Wout + kTile - 1) / kTile;
  const int64_t blocks = N * (int64_t)pos_tiles * G.groups * oc_tiles;
  TORCH_CHECK(blocks <= (int64_t)INT_MAX, "conv_transpose2d: problem too large for grid");
  const size_t smem = (size_t)ic_chunk * per_ic * sizeof(float);
  convt2d_tiled_kernel<OC_T><<<(unsigned int)blocks, kThreads, smem, stream>>>(
      x, w, b, y, G, ic_chunk, oc_tiles, pos_tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Launch the tiled kernel with the largest power-of-two OC_T <= oc_t.
template <int OC_T>
void dispatch_tiled(int oc_t, const float* x, const float* w, const float* b, float* y, int64_t N,
                    const Geom& G, cudaStream_t stream) {
  if constexpr (OC_T > 1) {
    if (oc_t < OC_T) {
      dispatch_tiled<OC_T / 2>(oc_t, x, w, b, y, N, G, stream);
      return;
    }
  }
  launch_tiled<OC_T>(x, w, b, y, N, G, stream);
}

}  // namespace

torch::Tensor conv_transpose2d_forward(torch::Tensor x, torch::Tensor w,
                                       std::optional<torch::Tensor> bias,
                                       int64_t stride_h, int64_t stride_w,
                                       int64_t pad_h, int64_t pad_w,
                                       int64_t out_pad_h, int64_t out_pad_w,
                                       int64_t dil_h, int64_t dil_w,
                                       int64_t groups) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "conv_transpose2d: x and weight must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "conv_transpose2d: x and weight must be float32");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous(),
              "conv_transpose2d: x and weight must be contiguous");
  TORCH_CHECK(x.dim() == 4, "conv_transpose2d: x must be (N, C_in, H, W)");
  TORCH_CHECK(w.dim() == 4, "conv_transpose2d: weight must be (C_in, C_out/groups, KH, KW)");
  TORCH_CHECK(x.device() == w.device(), "conv_transpose2d: x and weight on different devices");
  TORCH_CHECK(stride_h >= 1 && stride_w >= 1 && dil_h >= 1 && dil_w >= 1 && pad_h >= 0 &&
                  pad_w >= 0 && out_pad_h >= 0 && out_pad_w >= 0 && groups >= 1,
              "conv_transpose2d: invalid stride/padding/output_padding/dilation/groups");
  TORCH_CHECK((out_pad_h < stride_h || out_pad_h < dil_h) && (out_pad_w < stride_w || out_pad_w < dil_w),
              "conv_transpose2d: output padding must be smaller than either stride or dilation");

  const int64_t N = x.size(0), Cin = x.size(1), Hin = x.size(2), Win = x.size(3);
  const int64_t KH = w.size(2), KW = w.size(3);
  TORCH_CHECK(w.size(0) == Cin, "conv_transpose2d: weight.size(0) must equal C_in");
  TORCH_CHECK(Cin % groups == 0, "conv_transpose2d: C_in must be divisible by groups");
  TORCH_CHECK(KH >= 1 && KW >= 1, "conv_transpose2d: kernel size must be >= 1");
  const int64_t Cout = w.size(1) * groups;
  const int64_t Hout = (Hin - 1) * stride_h - 2 * pad_h + dil_h * (KH - 1) + out_pad_h + 1;
  const int64_t Wout = (Win - 1) * stride_w - 2 * pad_w + dil_w * (KW - 1) + out_pad_w + 1;
  TORCH_CHECK(Hout > 0 && Wout > 0, "conv_transpose2d: non-positive output size");
  TORCH_CHECK(Hout * Wout + (int64_t)kTile < INT_MAX && Hin * Win < INT_MAX &&
                  Hout + pad_h < INT_MAX && Wout + pad_w < INT_MAX &&
                  dil_h * (KH - 1) < INT_MAX && dil_w * (KW - 1) < INT_MAX &&
                  KH * KW * 16 < INT_MAX && Cin < INT_MAX && Cout < INT_MAX,
              "conv_transpose2d: a dimension exceeds 32-bit range");

  const float* bptr = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->is_cuda() && bias->scalar_type() == torch::kFloat32 && bias->is_contiguous(),
                "conv_transpose2d: bias must be a contiguous float32 CUDA tensor");
    TORCH_CHECK(bias->numel() == Cout, "conv_transpose2d: bias must have C_out elements");
    TORCH_CHECK(bias->device() == x.device(), "conv_transpose2d: bias on a different device");
    bptr = bias->data_ptr<float>();
  }

  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty({N, Cout, Hout, Wout}, x.options());
  if (y.numel() == 0) return y;
  if (Cin == 0) {  // empty reduction: output is just the bias
    if (bptr != nullptr) y.copy_(bias->view({1, Cout, 1, 1}).expand({N, Cout, Hout, Wout}));
    else y.zero_();
    return y;
  }

  Geom G;
  G.Cin = (int)Cin; G.Hin = (int)Hin; G.Win = (int)Win;
  G.Cout = (int)Cout; G.Hout = (int)Hout; G.Wout = (int)Wout;
  G.KH = (int)KH; G.KW = (int)KW;
  G.sh = (int)stride_h; G.sw = (int)stride_w; G.ph = (int)pad_h; G.pw = (int)pad_w;
  G.dh = (int)dil_h; G.dw = (int)dil_w; G.groups = (int)groups;

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int Cout_g = (int)(Cout / groups);
  const int64_t KK = KH * KW;

  // Output channels per thread: next power of two >= Cout_g, capped at kMaxOcT, and
  // shrunk until one input channel's weights fit the shared-memory budget.
  int oc_t = 1;
  while (oc_t < Cout_g && oc_t < kMaxOcT) oc_t *= 2;
  while (oc_t > 1 && KK * oc_t > kMaxSmemFloats) oc_t /= 2;

  if (KK * oc_t > kMaxSmemFloats) {
    const int64_t total = y.numel();
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 1 << 20);
    convt2d_simple_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(xp, wp, bptr, yp, N, G);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }

  dispatch_tiled<kMaxOcT>(oc_t, xp, wp, bptr, yp, N, G, stream);
  return y;
}
"""

_ext = load_inline(
    name="kbench_convt2d_gather_v2",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv_transpose2d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Transposed 2D convolution computed by a custom CUDA gather kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super(ModelNew, self).__init__()
        # Same module as the reference: it only holds the parameters.
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.conv_transpose2d
        b = m.bias
        return _ext.conv_transpose2d_forward(
            x.contiguous(), m.weight.contiguous(), None if b is None else b.contiguous(),
            m.stride[0], m.stride[1], m.padding[0], m.padding[1],
            m.output_padding[0], m.output_padding[1], m.dilation[0], m.dilation[1], m.groups)
