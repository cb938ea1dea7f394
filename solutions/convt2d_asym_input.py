"""Custom-CUDA solution for KernelBench level 1, problem 71
(conv_transposed_2D__asymmetric_input__square_kernel).

ModelNew holds the same nn.ConvTranspose2d as the reference Model (attribute
`conv_transpose2d`, same constructor signature (stride, padding,
output_padding, groups, bias) and creation order, so seeded init gives
identical parameters) and uses it only as a parameter container: forward
calls hand-written kernels, never torch's convolution.

Math (gather form, float32 in / float32 accumulate; this module never
dilates, so the kernel has no dilation):
  y[n, oc, h, w] = bias[oc] + sum_{ic in group(oc)} sum_{kh, kw}
      x[n, ic, (h + p - kh) / s, (w + p - kw) / s] * W[ic, oc % Cout_g, kh, kw]
  a tap counting only when both numerators are >= 0, divisible by the
  stride and the quotients fall inside the input.
  H_out = (H_in-1)*s - 2p + (K-1) + op + 1 (same for W).

This is an implicit GEMM per (image n, group g):
  C[m, oc] = sum_k A[m, k] * B[k, oc],  m = h*W_out + w,  k = (ic, kh, kw),
  A = the gathered input above (0 where no input feeds the tap), B = weights.
The official size (8x32x512x1024 input, 32 -> 32 channels, 3x3 kernel,
stride 1) is a 4.2M x 32 x 288 GEMM (78 GFLOP): compute bound, so the kernel
is a register-blocked SIMT SGEMM (strict fp32 FMAs, no tensor cores):

  * 256 threads per block, each owns an 8 x 8 register tile (8 positions as two
    groups of 4 consecutive m, 8 channels as two groups of 4) -> 64 FMAs per
    4 broadcast/contiguous float4 shared-memory loads. The block tile is
    512 x 32 (the official 32-channel groups: one channel tile, no waste) or
    256 x 64 for wider groups (several channel tiles beyond 64).
  * K is walked in slices of 8 input channels x one tap (channel chunk outer,
    tap inner, so successive slices re-read the same few input rows from L1).
    Each slice is gathered straight into shared memory with 4-byte cp.async
    (zero-fill where the tap has no input): lanes take consecutive m, so the
    reads are coalesced rows of x, and the tap's bounds / stride test is done
    once per slice per position, not per channel. B comes from a per-call
    transposed copy of the weights, Wt[ic][tap][oc] (coalesced along oc).
    Two shared-memory stages: slice t+1 is in flight while slice t is
    multiplied, one __syncthreads per slice.
  * Stride-1 layers (the official one) use a template instance whose tap test
    is two unsigned compares; other strides test divisibility.
  * Results are stored straight from registers: float4 stores when the output
    plane is a multiple of 4 (coalesced rows per channel), scalar otherwise.
    Zero-padded tails (m past the plane, oc past the group, ic past the
    group's channels) are masked at load and store time, so any size works.
  * Blocks are ordered (n, m-tile, group, oc-tile) with the oc tile fastest so
    blocks sharing an input tile run together. All global offsets are 64-bit;
    per-plane offsets are 32-bit and the host checks that they fit.
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
#include <type_traits>

// ---------------- device code ----------------
namespace convt2d {

constexpr int kThreads = 256;  // threads per block of the GEMM kernel
constexpr int kBK = 8;         // K slice: 8 input channels x one tap

struct Geom {
  int Cin_g, Hin, Win, Cout_g, Hout, Wout, KH, KW;
  int sh, sw, ph, pw, groups;
  int plane_in, plane_out;  // Hin*Win, Hout*Wout
};

// 4-byte global -> shared async copy; src_size 0 zero-fills the destination.
__device__ __forceinline__ void cp_async_f32(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(saddr), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
#else
  *dst = valid ? __ldg(src) : 0.f;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// W[ic][ocg][tap] -> Wt[ic][tap][ocg] (ic over all groups), grid-stride.
__global__ void transpose_weight_kernel(const float* __restrict__ w, float* __restrict__ wt,
                                        int64_t Cin, int Cout_g, int KK) {
  const int64_t total = Cin * (int64_t)Cout_g * KK;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int ocg = (int)(i % Cout_g);
    const int64_t r = i / Cout_g;
    const int tap = (int)(r % KK);
    const int64_t ic = r / KK;
    wt[i] = __ldg(w + (ic * Cout_g + ocg) * KK + tap);
  }
}

// Implicit-GEMM transposed convolution; block tile BM positions x BN channels.
template <int BM, int BN, bool kUnitStride>
__global__ void __launch_bounds__(kThreads, 2)
convt2d_igemm_kernel(const float* __restrict__ x, const float* __restrict__ wt,
                     const float* __restrict__ bias, float* __restrict__ y, const Geom G,
                     int m_tiles, int n_tiles, int vec_store) {
  static_assert(BM * BN == 64 * kThreads, "each thread owns 8 x 8 outputs");
  constexpr int TN = BN / 8;                             // threads along channels
  constexpr int AT = BM < kThreads ? BM : kThreads;      // threads along m when gathering A
  constexpr int MS = BM / AT;                            // m slots gathered per thread
  constexpr int KSTEP = kThreads / AT;                   // k-row stride of a thread's A rows
  constexpr int KR = kBK / KSTEP;                        // A rows gathered per thread per slot
  constexpr int BSTEP = kThreads / BN;                   // k-row stride of a thread's B rows
  constexpr int LB = kBK / BSTEP;                        // B elements loaded per thread
  static_assert(KR >= 1 && LB >= 1 && kBK % KSTEP == 0 && kBK % BSTEP == 0, "tile shape");

  __shared__ __align__(16) float As[2][kBK][BM];
  __shared__ __align__(16) float Bs[2][kBK][BN];

  const int tid = threadIdx.x;
  int64_t bid = blockIdx.x;
  const int nt = (int)(bid % n_tiles); bid /= n_tiles;
  const int g = (int)(bid % G.groups); bid /= G.groups;
  const int mt = (int)(bid % m_tiles); bid /= m_tiles;
  const int64_t n = bid;

  const int Cin_g = G.Cin_g, Cout_g = G.Cout_g;
  const int KK = G.KH * G.KW;
  const int m0 = mt * BM;
  const int n0 = nt * BN;
  const int64_t plane_in = G.plane_in;
  const float* __restrict__ xg = x + (n * G.groups + g) * (int64_t)Cin_g * plane_in;
  const float* __restrict__ wg = wt + (int64_t)g * Cin_g * KK * Cout_g + n0;

  // This thread's gather coordinates: A rows a_k + j*KSTEP at m = a_m + s*AT;
  // B rows b_k + i*BSTEP at channel b_n.
  const int a_m = tid % AT;
  const int a_k = tid / AT;
  const int b_n = tid % BN;
  const int b_k = tid / BN;
  const bool b_ok = n0 + b_n < Cout_g;
  int oh[MS], ow[MS];
  bool pv[MS];
#pragma unroll
  for (int s = 0; s < MS; ++s) {
    const int p = m0 + a_m + s * AT;
    pv[s] = p < G.plane_out;
    oh[s] = pv[s] ? p / G.Wout : 0;
    ow[s] = pv[s] ? p - oh[s] * G.Wout : 0;
  }

  // Global -> shared buffer `buf`, asynchronously (cp.async, zero-filled where
  // the tap has no input or the channel is past the group): slice (channels
  // ic0.., tap (kh, kw)).
  // kFull (a std::bool_constant): all kBK channels of the slice exist, so no
  // per-channel test and the source address is always inside x.
  auto issue_slice = [&](int buf, int ic0, int kh, int kw, int tap, auto full) {
    constexpr bool kFull = decltype(full)::value;
#pragma unroll
    for (int s = 0; s < MS; ++s) {
      int th = oh[s] + G.ph - kh;
      int tw = ow[s] + G.pw - kw;
      bool v = pv[s];
      if constexpr (kUnitStride) {
        v = v && (unsigned)th < (unsigned)G.Hin && (unsigned)tw < (unsigned)G.Win;
      } else {
        v = v && th >= 0 && tw >= 0;
        const int ih = th / G.sh, iw = tw / G.sw;
        v = v && ih * G.sh == th && iw * G.sw == tw && ih < G.Hin && iw < G.Win;
        th = ih;
        tw = iw;
      }
      const int off = v ? th * G.Win + tw : 0;
      const float* __restrict__ src = xg + (int64_t)(ic0 + a_k) * plane_in + off;
#pragma unroll
      for (int j = 0; j < KR; ++j) {
        float* dst = &As[buf][a_k + j * KSTEP][a_m + s * AT];
        if constexpr (kFull) {
          cp_async_f32(dst, src + (int64_t)(j * KSTEP) * plane_in, v);
        } else {
          const bool ok = v && ic0 + a_k + j * KSTEP < Cin_g;
          cp_async_f32(dst, ok ? src + (int64_t)(j * KSTEP) * plane_in : x, ok);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < LB; ++i) {
      const int ic = ic0 + b_k + i * BSTEP;
      const bool ok = b_ok && (kFull || ic < Cin_g);
      cp_async_f32(&Bs[buf][b_k + i * BSTEP][b_n],
                   ok ? wg + ((int64_t)ic * KK + tap) * Cout_g + b_n : wt, ok);
    }
    cp_async_commit();
  };

  // Compute coordinates: positions tm*4+{0..3} and BM/2+tm*4+{0..3},
  // channels tn*4+{0..3} and BN/2+tn*4+{0..3}.
  const int tn = tid % TN;
  const int tm = tid / TN;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  const int T = ((Cin_g + kBK - 1) / kBK) * KK;  // number of K slices (>= 1)
  // Coordinates of the slice being loaded (channel chunk outer, tap inner).
  int l_ic0 = 0, l_tap = 0, l_kh = 0, l_kw = 0;
  auto issue = [&](int buf, int ic0, int kh, int kw, int tap) {
    if (ic0 + kBK <= Cin_g) issue_slice(buf, ic0, kh, kw, tap, std::true_type{});
    else issue_slice(buf, ic0, kh, kw, tap, std::false_type{});
  };
  issue(0, 0, 0, 0, 0);
  cp_async_wait_all();
  __syncthreads();

  for (int t = 0; t < T; ++t) {
    const int buf = t & 1;
    const bool more = t + 1 < T;
    if (more) {
      ++l_tap;
      if (++l_kw == G.KW) { l_kw = 0; ++l_kh; }
      if (l_tap == KK) { l_tap = 0; l_kh = 0; l_kw = 0; l_ic0 += kBK; }
      issue(buf ^ 1, l_ic0, l_kh, l_kw, l_tap);
    }
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][tm * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][BM / 2 + tm * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][tn * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][BN / 2 + tn * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    cp_async_wait_all();  // this thread's copies of slice t+1 have landed ...
    __syncthreads();      // ... and everyone's; buffer `buf` is free again
  }

  // Epilogue: bias and store, registers -> y.
  const int plane_out = G.plane_out;
  float* __restrict__ yb = y + (n * G.groups + g) * (int64_t)Cout_g * plane_out;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int ocg = n0 + (j < 4 ? tn * 4 + j : BN / 2 + tn * 4 + (j - 4));
    if (ocg >= Cout_g) continue;
    const float bv = bias != nullptr ? __ldg(bias + g * Cout_g + ocg) : 0.f;
    float* __restrict__ yr = yb + (int64_t)ocg * plane_out;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = m0 + h * (BM / 2) + tm * 4;
      if (vec_store) {
        if (p < plane_out)
          *reinterpret_cast<float4*>(yr + p) =
              make_float4(acc[h * 4][j] + bv, acc[h * 4 + 1][j] + bv, acc[h * 4 + 2][j] + bv,
                          acc[h * 4 + 3][j] + bv);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (p + e < plane_out) yr[p + e] = acc[h * 4 + e][j] + bv;
      }
    }
  }
}

// Tile choice: BN = 32 (the official 32-channel layer) or 64 for wider groups.
inline int pick_bn(int Cout_g) { return Cout_g <= 32 ? 32 : 64; }

}  // namespace convt2d
// ---------------- host code ----------------

namespace {

template <int BN, bool kUnit>
void launch_igemm(const float* x, const float* wt, const float* b, float* y, int64_t N,
                  const convt2d::Geom& G, bool vec_store, cudaStream_t stream) {
  constexpr int BM = 64 * convt2d::kThreads / BN;
  const int m_tiles = (G.plane_out + BM - 1) / BM;
  const int n_tiles = (G.Cout_g + BN - 1) / BN;
  const int64_t blocks = N * (int64_t)m_tiles * G.groups * n_tiles;
  TORCH_CHECK(blocks <= (int64_t)INT_MAX, "conv_transpose2d: problem too large for the grid");
  convt2d::convt2d_igemm_kernel<BM, BN, kUnit><<<(unsigned int)blocks, convt2d::kThreads, 0, stream>>>(
      x, wt, b, y, G, m_tiles, n_tiles, vec_store ? 1 : 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <bool kUnit>
void dispatch_bn(int bn, const float* x, const float* wt, const float* b, float* y, int64_t N,
                 const convt2d::Geom& G, bool vec_store, cudaStream_t stream) {
  if (bn == 32) launch_igemm<32, kUnit>(x, wt, b, y, N, G, vec_store, stream);
  else launch_igemm<64, kUnit>(x, wt, b, y, N, G, vec_store, stream);
}

}  // namespace

torch::Tensor conv_transpose2d_forward(torch::Tensor x, torch::Tensor w,
                                       std::optional<torch::Tensor> bias,
                                       int64_t stride_h, int64_t stride_w,
                                       int64_t pad_h, int64_t pad_w,
                                       int64_t out_pad_h, int64_t out_pad_w,
                                       int64_t groups) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "conv_transpose2d: x and weight must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "conv_transpose2d: x and weight must be float32");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous(),
              "conv_transpose2d: x and weight must be contiguous");
  TORCH_CHECK(x.dim() == 4, "conv_transpose2d: x must be (N, C_in, H, W)");
  TORCH_CHECK(w.dim() == 4, "conv_transpose2d: weight must be (C_in, C_out/groups, KH, KW)");
  TORCH_CHECK(x.device() == w.device(), "conv_transpose2d: x and weight on different devices");
  TORCH_CHECK(stride_h >= 1 && stride_w >= 1 && pad_h >= 0 && pad_w >= 0 && out_pad_h >= 0 &&
                  out_pad_w >= 0 && groups >= 1,
              "conv_transpose2d: invalid stride/padding/output_padding/groups");
  TORCH_CHECK(out_pad_h < stride_h && out_pad_w < stride_w,
              "conv_transpose2d: output padding must be smaller than stride (dilation is 1)");

  const int64_t N = x.size(0), Cin = x.size(1), Hin = x.size(2), Win = x.size(3);
  const int64_t KH = w.size(2), KW = w.size(3);
  TORCH_CHECK(w.size(0) == Cin, "conv_transpose2d: weight.size(0) must equal C_in");
  TORCH_CHECK(Cin % groups == 0, "conv_transpose2d: C_in must be divisible by groups");
  TORCH_CHECK(KH >= 1 && KW >= 1, "conv_transpose2d: kernel size must be >= 1");
  const int64_t Cout_g = w.size(1);
  const int64_t Cout = Cout_g * groups;
  const int64_t Hout = (Hin - 1) * stride_h - 2 * pad_h + (KH - 1) + out_pad_h + 1;
  const int64_t Wout = (Win - 1) * stride_w - 2 * pad_w + (KW - 1) + out_pad_w + 1;
  TORCH_CHECK(Hout > 0 && Wout > 0, "conv_transpose2d: non-positive output size");
  // 32-bit per-plane index math: offsets inside one input/output plane, tap
  // arithmetic and the tile index of the last position must fit in int.
  TORCH_CHECK(Hout * Wout + 1024 < INT_MAX && Hin * Win < INT_MAX &&
                  Hout + pad_h < INT_MAX && Wout + pad_w < INT_MAX &&
                  KH * KW < INT_MAX / 8 && Cin + 8 < INT_MAX && Cout < INT_MAX,
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
  if (Cin == 0) {  // empty reduction: the output is just the bias
    if (bptr != nullptr) y.copy_(bias->view({1, Cout, 1, 1}).expand({N, Cout, Hout, Wout}));
    else y.zero_();
    return y;
  }

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t KK = KH * KW;

  // Weights as Wt[ic][tap][oc_in_group]: the GEMM's B, contiguous along channels.
  auto wt = torch::empty({Cin * KK * Cout_g}, w.options());
  {
    const int64_t total = wt.numel();
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 4096);
    convt2d::transpose_weight_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(
        w.data_ptr<float>(), wt.data_ptr<float>(), Cin, (int)Cout_g, (int)KK);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  convt2d::Geom G;
  G.Cin_g = (int)(Cin / groups); G.Hin = (int)Hin; G.Win = (int)Win;
  G.Cout_g = (int)Cout_g; G.Hout = (int)Hout; G.Wout = (int)Wout;
  G.KH = (int)KH; G.KW = (int)KW;
  G.sh = (int)stride_h; G.sw = (int)stride_w; G.ph = (int)pad_h; G.pw = (int)pad_w;
  G.groups = (int)groups;
  G.plane_in = (int)(Hin * Win); G.plane_out = (int)(Hout * Wout);

  float* yp = y.data_ptr<float>();
  const bool vec_store = (G.plane_out % 4 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
  const int bn = convt2d::pick_bn(G.Cout_g);
  const float* xp = x.data_ptr<float>();
  const float* wtp = wt.data_ptr<float>();
  if (stride_h == 1 && stride_w == 1)
    dispatch_bn<true>(bn, xp, wtp, bptr, yp, N, G, vec_store, stream);
  else
    dispatch_bn<false>(bn, xp, wtp, bptr, yp, N, G, vec_store, stream);
  return y;
}
"""

_ext = load_inline(
    name="kbench_convt2d_asym_input_igemm",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["conv_transpose2d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Transposed 2D convolution computed by a custom CUDA implicit-GEMM kernel."""

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
            m.output_padding[0], m.output_padding[1], m.groups)
