"""Simple custom-CUDA solution for KernelBench level 1, problem 63
(conv_standard_2D__square_input__square_kernel).

ModelNew holds the same nn.Conv2d as the reference Model (attribute `conv2d`, same constructor
signature and creation order, so seeded init gives identical parameters) and uses it only as a
parameter container: forward calls the hand-written direct convolution below, never torch's.

  y[n, oc, oh, ow] = bias[oc] + sum_{ic in group(oc)} sum_{kh, kw}
      x[n, ic, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] * W[oc, ic - g*Cin_g, kh, kw]
  (zero padding), H_out = (H + 2ph - dh*(KH-1) - 1) / sh + 1 (same for W).
General: any stride / padding / dilation / groups / bias, any sizes.

Kernel (a direct convolution, strict float32 FMAs, no tensor cores):
  * One thread per output pixel, computing that pixel for 16 output channels at once (so each
    input value loaded feeds 16 FMAs). A block of 256 threads owns (batch n, group g, 256
    consecutive pixels of the flattened H_out x W_out plane, a tile of 16 output channels of
    the group); the channel tile varies fastest across blocks, so the blocks that read the
    same input pixels run together and hit L2.
  * The block's weights for the 16 channels are staged in shared memory as
    [ic][kh][kw][16] (zero for channels past the group's end), in chunks of input channels
    of at most 32 KB; the inner loop reads them as 4 broadcast float4s per input value.
  * Input values are read straight from global memory (coalesced along the row, cached in
    L1); taps outside the input are skipped (zero padding).
  * A plain one-thread-per-output kernel with weights read from global memory covers the
    (extreme) case where one input channel's 16-channel weights exceed 32 KB (KH*KW > 512).
All global index math is 64-bit.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor conv2d_simple(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> bias,
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

constexpr int kThreads = 256;          // output pixels per block (one per thread)
constexpr int kOcT = 16;               // output channels per thread
constexpr int kMaxSmemFloats = 8192;   // 32 KB of staged weights per chunk

struct Geom {
  int Cin, H, W, Cout, Hout, Wout, KH, KW;
  int sh, sw, ph, pw, dh, dw, groups;
};

__global__ void __launch_bounds__(kThreads)
conv2d_oc16_kernel(const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ bias, float* __restrict__ y, const Geom G,
                   int ic_chunk, int oc_tiles, int pos_tiles) {
  extern __shared__ float4 smem4[];
  float* smw = reinterpret_cast<float*>(smem4);

  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int KK = G.KH * G.KW;
  const int plane_out = G.Hout * G.Wout;
  const int64_t plane_in = (int64_t)G.H * G.W;

  int64_t bid = blockIdx.x;
  const int oc_tile = (int)(bid % oc_tiles); bid /= oc_tiles;
  const int pt = (int)(bid % pos_tiles);     bid /= pos_tiles;
  const int g = (int)(bid % G.groups);       bid /= G.groups;
  const int64_t n = bid;

  const int tid = threadIdx.x;
  const int ocg0 = oc_tile * kOcT;
  const int p = pt * kThreads + tid;
  const bool valid = p < plane_out;
  const int oh = valid ? p / G.Wout : 0;
  const int ow = valid ? p - oh * G.Wout : 0;
  const int ih0 = oh * G.sh - G.ph;
  const int iw0 = ow * G.sw - G.pw;

  const float* __restrict__ xg = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;

  float acc[kOcT];
#pragma unroll
  for (int c = 0; c < kOcT; ++c) acc[c] = 0.f;

  for (int ic0 = 0; ic0 < Cin_g; ic0 += ic_chunk) {
    const int nic = min(ic_chunk, Cin_g - ic0);
    __syncthreads();  // the previous chunk is fully consumed
    // smw[(icl*KK + tap)*16 + c] = W[g*Cout_g + ocg0 + c][ic0 + icl][tap]  (0 past Cout_g)
    const int total = nic * KK * kOcT;
    for (int i = tid; i < total; i += kThreads) {
      const int c = i % kOcT;
      const int r = i / kOcT;          // icl*KK + tap
      const int icl = r / KK;
      const int tap = r - icl * KK;
      const int ocg = ocg0 + c;
      float v = 0.f;
      if (ocg < Cout_g) {
        const int64_t oc = (int64_t)g * Cout_g + ocg;
        v = __ldg(w + (oc * Cin_g + ic0 + icl) * (int64_t)KK + tap);
      }
      smw[i] = v;
    }
    __syncthreads();

    if (valid) {
      for (int icl = 0; icl < nic; ++icl) {
        const float* __restrict__ xc = xg + (int64_t)(ic0 + icl) * plane_in;
        const float* swi = smw + icl * KK * kOcT;
        for (int kh = 0; kh < G.KH; ++kh) {
          const int ih = ih0 + kh * G.dh;
          if (ih < 0 || ih >= G.H) continue;
          const float* __restrict__ row = xc + (int64_t)ih * G.W;
          const float* swr = swi + kh * G.KW * kOcT;
          for (int kw = 0; kw < G.KW; ++kw) {
            const int iw = iw0 + kw * G.dw;
            if (iw < 0 || iw >= G.W) continue;
            const float xv = __ldg(row + iw);
            const float4* wv = reinterpret_cast<const float4*>(swr + kw * kOcT);
#pragma unroll
            for (int q = 0; q < kOcT / 4; ++q) {
              const float4 ww = wv[q];
              acc[4 * q + 0] = fmaf(xv, ww.x, acc[4 * q + 0]);
              acc[4 * q + 1] = fmaf(xv, ww.y, acc[4 * q + 1]);
              acc[4 * q + 2] = fmaf(xv, ww.z, acc[4 * q + 2]);
              acc[4 * q + 3] = fmaf(xv, ww.w, acc[4 * q + 3]);
            }
          }
        }
      }
    }
  }

  if (valid) {
#pragma unroll
    for (int c = 0; c < kOcT; ++c) {
      const int ocg = ocg0 + c;
      if (ocg < Cout_g) {
        const int64_t oc = (int64_t)g * Cout_g + ocg;
        const float b = bias != nullptr ? __ldg(bias + oc) : 0.f;
        y[(n * G.Cout + oc) * (int64_t)plane_out + p] = acc[c] + b;
      }
    }
  }
}

// Fallback for huge kernels: one thread per output element, weights from global memory.
__global__ void conv2d_naive_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    const float* __restrict__ bias, float* __restrict__ y,
                                    int64_t total, const Geom G) {
  const int Cin_g = G.Cin / G.groups;
  const int Cout_g = G.Cout / G.groups;
  const int64_t plane_out = (int64_t)G.Hout * G.Wout;
  const int64_t plane_in = (int64_t)G.H * G.W;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t pix = idx % plane_out;
    const int64_t r = idx / plane_out;
    const int oc = (int)(r % G.Cout);
    const int64_t n = r / G.Cout;
    const int oh = (int)(pix / G.Wout);
    const int ow = (int)(pix % G.Wout);
    const int g = oc / Cout_g;
    const float* __restrict__ xb = x + (n * G.Cin + (int64_t)g * Cin_g) * plane_in;
    const float* __restrict__ wb = w + (int64_t)oc * Cin_g * G.KH * G.KW;
    float acc = 0.f;
    for (int ic = 0; ic < Cin_g; ++ic) {
      for (int kh = 0; kh < G.KH; ++kh) {
        const int ih = oh * G.sh - G.ph + kh * G.dh;
        if (ih < 0 || ih >= G.H) continue;
        for (int kw = 0; kw < G.KW; ++kw) {
          const int iw = ow * G.sw - G.pw + kw * G.dw;
          if (iw < 0 || iw >= G.W) continue;
          acc = fmaf(__ldg(xb + ic * plane_in + (int64_t)ih * G.W + iw),
                     __ldg(wb + ((int64_t)ic * G.KH + kh) * G.KW + kw), acc);
        }
      }
    }
    if (bias != nullptr) acc += __ldg(bias + oc);
    y[idx] = acc;
  }
}

}  // namespace

torch::Tensor conv2d_simple(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> bias,
                            int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                            int64_t dil_h, int64_t dil_w, int64_t groups) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "conv2d: x and weight must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "conv2d: x and weight must be float32");
  TORCH_CHECK(x.dim() == 4, "conv2d: x must be (N, C_in, H, W)");
  TORCH_CHECK(w.dim() == 4, "conv2d: weight must be (C_out, C_in/groups, KH, KW)");
  TORCH_CHECK(x.device() == w.device(), "conv2d: x and weight on different devices");
  TORCH_CHECK(stride_h >= 1 && stride_w >= 1 && dil_h >= 1 && dil_w >= 1 && pad_h >= 0 &&
                  pad_w >= 0 && groups >= 1,
              "conv2d: invalid stride / padding / dilation / groups");
  x = x.contiguous();
  w = w.contiguous();

  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = w.size(0), KH = w.size(2), KW = w.size(3);
  TORCH_CHECK(Cin % groups == 0 && Cout % groups == 0,
              "conv2d: channels must be divisible by groups");
  TORCH_CHECK(w.size(1) * groups == Cin, "conv2d: weight.size(1) * groups must equal C_in");
  TORCH_CHECK(KH >= 1 && KW >= 1, "conv2d: kernel size must be >= 1");
  const int64_t Hout = (H + 2 * pad_h - dil_h * (KH - 1) - 1) / stride_h + 1;
  const int64_t Wout = (W + 2 * pad_w - dil_w * (KW - 1) - 1) / stride_w + 1;
  TORCH_CHECK(H + 2 * pad_h - dil_h * (KH - 1) - 1 >= 0 && W + 2 * pad_w - dil_w * (KW - 1) - 1 >= 0,
              "conv2d: kernel size can't be greater than the padded input size");
  TORCH_CHECK(Hout * Wout + kThreads < INT_MAX && H * W < INT_MAX &&
                  Hout * stride_h + dil_h * KH < INT_MAX && Wout * stride_w + dil_w * KW < INT_MAX &&
                  H + pad_h < INT_MAX && W + pad_w < INT_MAX && KH * KW * kOcT < INT_MAX &&
                  Cin < INT_MAX && Cout < INT_MAX,
              "conv2d: a dimension exceeds 32-bit range");

  const float* bptr = nullptr;
  torch::Tensor b;
  if (bias.has_value() && bias->defined()) {
    b = bias->contiguous();
    TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32, "conv2d: bias must be float32 CUDA");
    TORCH_CHECK(b.numel() == Cout, "conv2d: bias must have C_out elements");
    bptr = b.data_ptr<float>();
  }

  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty({N, Cout, Hout, Wout}, x.options());
  if (y.numel() == 0) return y;

  Geom G;
  G.Cin = (int)Cin; G.H = (int)H; G.W = (int)W;
  G.Cout = (int)Cout; G.Hout = (int)Hout; G.Wout = (int)Wout;
  G.KH = (int)KH; G.KW = (int)KW;
  G.sh = (int)stride_h; G.sw = (int)stride_w; G.ph = (int)pad_h; G.pw = (int)pad_w;
  G.dh = (int)dil_h; G.dw = (int)dil_w; G.groups = (int)groups;

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t Cin_g = Cin / groups, Cout_g = Cout / groups;
  const int64_t per_ic = KH * KW * kOcT;

  if (per_ic <= kMaxSmemFloats && Cin_g > 0) {
    const int ic_chunk = (int)std::max<int64_t>(1, std::min<int64_t>(Cin_g, kMaxSmemFloats / per_ic));
    const int oc_tiles = (int)((Cout_g + kOcT - 1) / kOcT);
    const int pos_tiles = (int)((Hout * Wout + kThreads - 1) / kThreads);
    const int64_t blocks = N * groups * (int64_t)pos_tiles * oc_tiles;
    TORCH_CHECK(blocks <= (int64_t)INT_MAX, "conv2d: problem too large for the grid");
    const size_t smem = (size_t)ic_chunk * per_ic * sizeof(float);
    conv2d_oc16_kernel<<<(unsigned int)blocks, kThreads, smem, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), bptr, y.data_ptr<float>(), G, ic_chunk,
        oc_tiles, pos_tiles);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    const int64_t total = y.numel();
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, (int64_t)1 << 22);
    conv2d_naive_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), bptr, y.data_ptr<float>(), total, G);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_conv2d_simple_v1",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv2d_simple"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, (tuple, list)) else (int(v), int(v))


class ModelNew(nn.Module):
    """2-D convolution computed by a simple custom CUDA direct-convolution kernel."""

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
        return _ext.conv2d_simple(x.contiguous(), m.weight.contiguous(),
                                  None if b is None else b.contiguous(),
                                  sh, sw, ph, pw, dh, dw, m.groups)
