"""Custom-CUDA solution for KernelBench level 1, problem 57
(conv_transposed_2D__square_input__square_kernel).

Official size: x (8, 64, 1024, 1024), 64 -> 64 channels, 3x3, stride 1: a
single phase, compute-bound (~0.6 TFLOP); the sweep varies stride (1-5),
padding, output_padding, groups and bias, and height / width independently.

ModelNew holds the same nn.ConvTranspose2d as the reference Model (attribute
`conv_transpose2d`, same constructor signature and creation order, so seeded
init gives identical parameters) and uses it only as a parameter container:
forward calls a hand-written phase-decomposed gather kernel, never torch's
convolution.

Kernel (gather formulation, float32 in / float32 accumulate), general in 2D
(stride, padding, output_padding, dilation, groups, optional bias, any sizes):
  y[n, oc, h, w] = bias[oc] + sum_{ic in group(oc)} sum_{kh, kw}
      x[n, ic, (h + ph - kh*dh) / sh, (w + pw - kw*dw) / sw] * W[ic, oc % Cout_g, kh, kw]
  where a tap is used only when both numerators are divisible by their stride
  and the quotients lie inside the input.
  H_out = (H_in-1)*sh - 2ph + dh*(KH-1) + oph + 1 (same for W).

Phase decomposition: output row h = rh + sh*a (phase rh in [0, sh)). Tap kh
hits that row iff (rh + ph - kh*dh) % sh == 0, which depends on the phase
only; the solutions form an arithmetic run kh0, kh0 + L, kh0 + 2L, ... < KH
with L = sh / gcd(sh, dh) (kh0 = the one solution in [0, min(KH, L)), if
any), and tap i reads input row ih = a + q0 - i*Dq with
q0 = (rh + ph - kh0*dh) / sh (exact) and Dq = dh / gcd(sh, dh). Same for
columns. So within one (rh, rw) phase every output has the same tap list
and each tap is a shifted dense read of the input: no divisibility test per
output, only bounds checks 0 <= ih < H_in, 0 <= iw < W_in.

Tiled path: a block of 128 threads owns (batch n, group g, output phase
(rh, rw), a tile of OC_T output channels of that group, 512 consecutive
positions of the phase plane ceil(H_out/sh) x ceil(W_out/sw), positions
outside the output masked). Each thread accumulates OC_T channels x 4
positions (strided by the block size, so input loads are coalesced along the
last dimension). Only the phase's valid taps are staged in shared memory,
compacted as [ic][tap][OC_T], in passes over input channels (as many as fit
a 32 KB budget), and read as broadcast float4s; the input-channel loop is
unrolled; the input-offset arithmetic is done once per tap and hoisted out of
the input-channel loop. A phase with no tap writes just the bias (or 0).
Blocks are ordered output-channel tile fastest, then phase, so the blocks
that read the same input tile and write interleaved outputs of the same
region run together (L2 hits, merged partial-sector stores when the stride
is > 1). A plain one-thread-per-output kernel covers the (extreme) case where
one input channel's taps for a single output channel would not fit in shared
memory. Global offsets are 64-bit; per-plane offsets are 32-bit after host
checks that the planes fit.
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
#include <numeric>

namespace {

constexpr int kThreads = 128;                 // threads per block (tiled path)
constexpr int kPos = 4;                       // output positions per thread
constexpr int kTile = kThreads * kPos;        // phase-plane positions per block
constexpr int kMaxSmemFloats = 8192;          // 32 KB of staged weights
constexpr int kMaxOcT = 16;                   // max output channels per thread (power of 2)
constexpr int kIcUnroll = 2;                  // unroll factor of the input-channel loop

struct Geom {
  int Cin, Hin, Win, Cout, Hout, Wout, KH, KW;
  int sh, sw, ph, pw, dh, dw, groups;
  // Per dimension: the valid taps of one output phase are k0, k0 + L, k0 + 2L, ...
  // (L = s / gcd(s, d)); tap i of a phase reads input row/col  a + q0 - i * Dq
  // (Dq = d / gcd(s, d)), a being the position's index inside its phase.
  int Lh, Lw, Dqh, Dqw;
  int Hp, Wp;   // phase-plane extent: ceil(Hout / sh) x ceil(Wout / sw)
};

// Taps of output phase r (output index o = r + s * a) in one dimension: the k in [0, K)
// with (r + p - k*d) divisible by s. They form k0 + i*L, i < nk; q0 = (r + p - k0*d) / s.
__device__ __forceinline__ void phase_taps(int r, int s, int p, int d, int K, int L,
                                           int& k0, int& nk, int& q0) {
  k0 = -1;
  const int lim = min(K, L);
  for (int k = 0; k < lim; ++k) {
    const long long t = (long long)r + p - (long long)k * d;
    if (t % s == 0) { k0 = k; break; }
  }
  if (k0 < 0) { nk = 0; q0 = 0; return; }
  nk = (K - 1 - k0) / L + 1;
  q0 = (int)(((long long)r + p - (long long)k0 * d) / s);  // exact division
}

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
convt2d_phase_kernel(const float* __restrict__ x, const float* __restrict__ w,
                     const float* __restrict__ bias, float* __restrict__ y, const Geom G,
                     int ic_chunk, int oc_tiles, int pos_tiles) {
  extern __shared__ __align__(16) float smw[];
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int plane_out = G.Hout * G.Wout;
  const int64_t plane_in = (int64_t)G.Hin * G.Win;
  const int phase_plane = G.Hp * G.Wp;
  const int nph = G.sh * G.sw;

  int64_t bid = blockIdx.x;
  const int oc_tile = (int)(bid % oc_tiles); bid /= oc_tiles;
  const int phase = (int)(bid % nph);        bid /= nph;
  const int g = (int)(bid % G.groups);       bid /= G.groups;
  const int pt = (int)(bid % pos_tiles);     bid /= pos_tiles;
  const int64_t n = bid;

  const int rh = phase / G.sw;
  const int rw = phase - rh * G.sw;
  int kh0, nkh, qh0, kw0, nkw, qw0;
  phase_taps(rh, G.sh, G.ph, G.dh, G.KH, G.Lh, kh0, nkh, qh0);
  phase_taps(rw, G.sw, G.pw, G.dw, G.KW, G.Lw, kw0, nkw, qw0);
  const int nt = nkh * nkw;  // valid taps of this phase (block-uniform)

  const int tid = threadIdx.x;
  const int ocg0 = oc_tile * OC_T;
  const int q_base = pt * kTile + tid;

  // This thread's positions: phase-plane index q -> (a, b) -> output (rh + sh*a, rw + sw*b).
  int pa[kPos], pb[kPos], yoff[kPos];
#pragma unroll
  for (int j = 0; j < kPos; ++j) {
    const int q = q_base + j * kThreads;
    int a = 0, b = 0, o = -1;
    if (q < phase_plane) {
      a = q / G.Wp;
      b = q - a * G.Wp;
      const int oh = rh + G.sh * a;
      const int ow = rw + G.sw * b;
      if (oh < G.Hout && ow < G.Wout) o = oh * G.Wout + ow;
    }
    pa[j] = a; pb[j] = b; yoff[j] = o;
  }

  float acc[kPos][OC_T];
#pragma unroll
  for (int j = 0; j < kPos; ++j)
#pragma unroll
    for (int c = 0; c < OC_T; ++c) acc[j][c] = 0.f;

  if (nt > 0) {
    const float* __restrict__ xg = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;
    const int per_ic = nt * OC_T;
    for (int ic0 = 0; ic0 < Cin_g; ic0 += ic_chunk) {
      const int nic = min(ic_chunk, Cin_g - ic0);
      __syncthreads();  // previous chunk fully consumed
      // Stage W[g*Cin_g+ic0+icl][ocg0+c][kh0+ih*Lh][kw0+iw*Lw] -> smw[(icl*nt + ih*nkw+iw)*OC_T + c].
      const int total = nic * per_ic;
      for (int i = tid; i < total; i += kThreads) {
        const int icl = i / per_ic;
        const int r = i - icl * per_ic;
        const int c = r / nt;
        const int ti = r - c * nt;
        const int ti_h = ti / nkw;
        const int ti_w = ti - ti_h * nkw;
        const int ocg = ocg0 + c;
        float v = 0.f;
        if (ocg < Cout_g) {
          const int64_t ic = (int64_t)g * Cin_g + ic0 + icl;
          const int kh = kh0 + ti_h * G.Lh;
          const int kw = kw0 + ti_w * G.Lw;
          v = __ldg(w + ((ic * Cout_g + ocg) * G.KH + kh) * (int64_t)G.KW + kw);
        }
        smw[(icl * nt + ti) * OC_T + c] = v;
      }
      __syncthreads();

      const float* __restrict__ xc = xg + (int64_t)ic0 * plane_in;
      for (int th = 0; th < nkh; ++th) {
        const int qh = qh0 - th * G.Dqh;
        int rowoff[kPos];
        bool any_row = false;
#pragma unroll
        for (int j = 0; j < kPos; ++j) {
          const int ih = pa[j] + qh;
          const bool ok = yoff[j] >= 0 && ih >= 0 && ih < G.Hin;
          rowoff[j] = ok ? ih * G.Win : -1;
          any_row |= ok;
        }
        if (!any_row) continue;
        for (int tw = 0; tw < nkw; ++tw) {
          const int qw = qw0 - tw * G.Dqw;
          int off[kPos];
          bool any = false;
#pragma unroll
          for (int j = 0; j < kPos; ++j) {
            const int iw = pb[j] + qw;
            const bool ok = rowoff[j] >= 0 && iw >= 0 && iw < G.Win;
            off[j] = ok ? rowoff[j] + iw : -1;
            any |= ok;
          }
          if (!any) continue;
          const float* swk = smw + (th * nkw + tw) * OC_T;
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
  }

  // Every in-range output of the tile is written (bias only where the phase has no tap).
#pragma unroll
  for (int c = 0; c < OC_T; ++c) {
    const int ocg = ocg0 + c;
    if (ocg < Cout_g) {
      const int oc = g * Cout_g + ocg;
      const float bv = bias != nullptr ? __ldg(bias + oc) : 0.f;
      float* __restrict__ yr = y + (n * G.Cout + oc) * (int64_t)plane_out;
#pragma unroll
      for (int j = 0; j < kPos; ++j)
        if (yoff[j] >= 0) yr[yoff[j]] = acc[j][c] + bv;
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
void launch_phase(const float* x, const float* w, const float* b, float* y, int64_t N,
                  const Geom& G, int nt_max, cudaStream_t stream) {
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int per_ic = nt_max * OC_T;
  const int ic_chunk = std::max(1, std::min(Cin_g, kMaxSmemFloats / per_ic));
  const int oc_tiles = (Cout_g + OC_T - 1) / OC_T;
  const int pos_tiles = (G.Hp * G.Wp + kTile - 1) / kTile;
  const int64_t blocks =
      N * (int64_t)pos_tiles * G.groups * ((int64_t)G.sh * G.sw) * oc_tiles;
  TORCH_CHECK(blocks <= (int64_t)INT_MAX, "conv_transpose2d: problem too large for grid");
  const size_t smem = (size_t)ic_chunk * per_ic * sizeof(float);
  convt2d_phase_kernel<OC_T><<<(unsigned int)blocks, kThreads, smem, stream>>>(
      x, w, b, y, G, ic_chunk, oc_tiles, pos_tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Launch the phase kernel with the largest power-of-two OC_T <= oc_t.
template <int OC_T>
void dispatch_phase(int oc_t, const float* x, const float* w, const float* b, float* y,
                    int64_t N, const Geom& G, int nt_max, cudaStream_t stream) {
  if constexpr (OC_T > 1) {
    if (oc_t < OC_T) {
      dispatch_phase<OC_T / 2>(oc_t, x, w, b, y, N, G, nt_max, stream);
      return;
    }
  }
  launch_phase<OC_T>(x, w, b, y, N, G, nt_max, stream);
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
  TORCH_CHECK(stride_h < 65536 && stride_w < 65536 && stride_h * stride_w < 65536,
              "conv_transpose2d: stride too large");
  const int64_t Hp = (Hout + stride_h - 1) / stride_h;
  const int64_t Wp = (Wout + stride_w - 1) / stride_w;
  TORCH_CHECK(Hout * Wout + (int64_t)kTile < INT_MAX && Hp * Wp + (int64_t)kTile < INT_MAX &&
                  Hin * Win < INT_MAX && Hout + stride_h + pad_h < INT_MAX &&
                  Wout + stride_w + pad_w < INT_MAX && dil_h * (KH - 1) < INT_MAX &&
                  dil_w * (KW - 1) < INT_MAX && KH * KW * 16 < INT_MAX && Cin < INT_MAX &&
                  Cout < INT_MAX,
              "conv_transpose2d: a dimension exceeds 32-bit range");

  const float* bptr = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->is_cuda() && bias->scalar_type() == torch::kFloat32 && bias->is_contiguous(),
                "conv_transpose2d: bias must be a contiguous float32 CUDA tensor");
    TORCH_CHECK(bias->numel() == Cout, "conv_transpose2d: bias must have C_out elements");
    TORCH_CHECK(bias->device() == x.device(), "conv_transpose2d: bias on a different device");
    bptr = bias->data_ptr<float>();
  }

  const at::cuda::OptionalCUDAGuard guard(x.device());
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
  const int64_t gh = std::gcd(stride_h, dil_h), gw = std::gcd(stride_w, dil_w);
  G.Lh = (int)(stride_h / gh); G.Dqh = (int)(dil_h / gh);
  G.Lw = (int)(stride_w / gw); G.Dqw = (int)(dil_w / gw);
  G.Hp = (int)Hp; G.Wp = (int)Wp;

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int Cout_g = (int)(Cout / groups);
  // Most taps any phase has: ceil(K / L) per dimension (phase with k0 = 0).
  const int64_t nt_max = ((KH + G.Lh - 1) / G.Lh) * ((KW + G.Lw - 1) / G.Lw);

  // Output channels per thread: next power of two >= Cout_g, capped at kMaxOcT, and
  // shrunk until one input channel's weights (all taps of a phase) fit the budget.
  int oc_t = 1;
  while (oc_t < Cout_g && oc_t < kMaxOcT) oc_t *= 2;
  while (oc_t > 1 && nt_max * oc_t > kMaxSmemFloats) oc_t /= 2;

  if (nt_max * oc_t > kMaxSmemFloats) {
    const int64_t total = y.numel();
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 1 << 20);
    convt2d_simple_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(xp, wp, bptr, yp, N, G);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  }

  dispatch_phase<kMaxOcT>(oc_t, xp, wp, bptr, yp, N, G, (int)nt_max, stream);
  return y;
}
"""

_ext = load_inline(
    name="kbench_convt2d_square_phase",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv_transpose2d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Transposed 2D convolution computed by a custom phase-decomposed CUDA gather kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
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
