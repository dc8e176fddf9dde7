// CUDA versions of the hybrid layers' small ops (hybrid_ops.h): fp32 math and one bf16
// rounding per output, like the CPU references. All of them are memory-bound, so each moves
// 16-byte vectors (8 bf16) when the views allow it, with a scalar path for odd widths,
// strides and offsets.
//   conv:        each thread owns 8 consecutive channels and a run of kConvRun consecutive
//                tokens. It finds the run's document once (binary search of cu_seqlens),
//                keeps the last K-1 inputs in registers (a sliding window, zeroed at every
//                document start) and so reads each input once, plus K-1 rows of halo per
//                run. The K taps are summed in the CPU's order. A warp's threads hold
//                consecutive channel groups: one token row is 512 contiguous bytes. K > 4:
//                a plain one-thread-per-element kernel.
//   gates:       one thread per (token, value head).
//   norms:       a unit (a row, or one head of it for the gated norm) is normalised by a
//                group of threads that holds it in registers as 16-byte vectors: 8 or 16
//                lanes for a 128- or 256-wide head (several units per warp), a warp, or a
//                block for wide rows (the 5120-wide residual norm: 160 threads x 4 vectors).
//                The sum of squares is a shuffle reduction (and shared memory across warps).
//                Odd shapes: one warp per unit with scalar loads.
//   sigmoid gate: one thread per 16-byte vector (or per element).
#include <cuda_bf16.h>

#include "kernels/linear_attention/hybrid_ops_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kConvRun = 32;      // tokens per conv thread
constexpr int kConvUnroll = 8;    // rows loaded ahead in the conv's token loop
constexpr int kConvThreads = 128;
constexpr int kConvMaxK = 4;      // the register window's largest K

__device__ float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
// The same value within a few fp32 ulp (far below the bf16 rounding that follows), from the
// fast exp and reciprocal: the conv and the gates would otherwise spend as long in the
// IEEE expf and division as in moving their bytes. exp(-x) = inf gives 0, as it should.
__device__ __forceinline__ float FastSigmoid(float x) {
  return __fdividef(1.f, 1.f + __expf(-x));
}
__device__ __forceinline__ float Silu(float x) { return x * FastSigmoid(x); }
__device__ float Softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }
__device__ float Ld(const bf16_t* p) { return __bfloat162float(*p); }

__device__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

unsigned Blocks(int64_t n, int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 8 bf16 <-> floats through one 16-byte word.
__device__ __forceinline__ void Unpack8(const uint4& raw, float v[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 p = *reinterpret_cast<const __nv_bfloat162*>(&w[i]);
    v[2 * i] = __low2float(p);
    v[2 * i + 1] = __high2float(p);
  }
}
__device__ __forceinline__ uint4 Pack8(const float v[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    w[i] = *reinterpret_cast<const uint32_t*>(&p);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Eight consecutive elements at p as one 16-byte word of bf16, the first n of them valid
// (zeros after): one 16-byte load with kVec (then n == 8), else scalar loads.
template <bool kVec>
__device__ __forceinline__ uint4 LoadRaw8(const bf16_t* p, int n) {
  if (kVec) return *reinterpret_cast<const uint4*>(p);
  uint32_t w[4] = {0, 0, 0, 0};
  const auto* h = reinterpret_cast<const uint16_t*>(p);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < n) w[i / 2] |= uint32_t{h[i]} << (16 * (i % 2));
  return make_uint4(w[0], w[1], w[2], w[3]);
}
template <bool kVec>
__device__ __forceinline__ void Load8(const bf16_t* p, int n, float v[8]) {
  Unpack8(LoadRaw8<kVec>(p, n), v);
}
template <bool kVec>
__device__ __forceinline__ void Store8(bf16_t* p, int n, const float v[8]) {
  if (kVec) {
    *reinterpret_cast<uint4*>(p) = Pack8(v);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < n) p[i] = __float2bfloat16(v[i]);
  }
}

// ---- causal conv1d + SiLU ----------------------------------------------------------------

// Grid: x over channel groups of 8, y over runs of kConvRun tokens (grid-strided).
template <int K, bool kVec>
__global__ void __launch_bounds__(kConvThreads)
    causal_conv1d_silu_kernel(bf16_t* out, int64_t out_stride, const bf16_t* x, int64_t x_stride,
                              const bf16_t* w, const int32_t* cu, int docs, int64_t t, int64_t c) {
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 8;
  if (c0 >= c) return;
  const int nc = c - c0 < 8 ? static_cast<int>(c - c0) : 8;
  float wt[K][8];  // wt[j][i]: tap j of channel c0 + i
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) wt[j][i] = i < nc ? Ld(w + (c0 + i) * K + j) : 0.f;
  for (int64_t t0 = int64_t{blockIdx.y} * kConvRun; t0 < t; t0 += int64_t{gridDim.y} * kConvRun) {
    const int64_t t1 = t0 + kConvRun < t ? t0 + kConvRun : t;
    int lo = 0, hi = docs;  // cu[lo] <= t0 < cu[lo + 1]
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (cu[mid] <= t0)
        lo = mid;
      else
        hi = mid;
    }
    int64_t next = cu[lo + 1];  // the next document's first token
    // win[j]: the 8 inputs K-1-j tokens back, as bf16 (zeros before the document).
    uint4 win[K > 1 ? K - 1 : 1];
#pragma unroll
    for (int j = 0; j < K - 1; ++j) {
      const int64_t src = t0 - (K - 1) + j;
      win[j] = src >= cu[lo] ? LoadRaw8<kVec>(x + src * x_stride + c0, nc) : make_uint4(0, 0, 0, 0);
    }
    for (int64_t base = t0; base < t1; base += kConvUnroll) {
      uint4 cur[kConvUnroll];
#pragma unroll
      for (int u = 0; u < kConvUnroll; ++u)
        if (base + u < t1) cur[u] = LoadRaw8<kVec>(x + (base + u) * x_stride + c0, nc);
#pragma unroll
      for (int u = 0; u < kConvUnroll; ++u) {
        const int64_t tok = base + u;
        if (tok >= t1) break;
        if (tok >= next) {  // a document starts here: the taps before it read zero
          do next = cu[++lo + 1];
          while (next <= tok);
#pragma unroll
          for (int j = 0; j < K - 1; ++j) win[j] = make_uint4(0, 0, 0, 0);
        }
        float acc[8] = {}, v[8];
#pragma unroll
        for (int j = 0; j < K - 1; ++j) {
          Unpack8(win[j], v);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[i] += wt[j][i] * v[i];
        }
        Unpack8(cur[u], v);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = Silu(acc[i] + wt[K - 1][i] * v[i]);
        Store8<kVec>(out + tok * out_stride + c0, nc, acc);
#pragma unroll
        for (int j = 0; j + 1 < K - 1; ++j) win[j] = win[j + 1];
        if (K > 1) win[K > 1 ? K - 2 : 0] = cur[u];
      }
    }
  }
}

// Any K: one thread per (token, channel), the document found per element.
__global__ void causal_conv1d_silu_any_k_kernel(bf16_t* out, int64_t out_stride, const bf16_t* x,
                                                int64_t x_stride, const bf16_t* w,
                                                const int32_t* cu, int docs, int64_t t, int64_t c,
                                                int64_t k) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= t * c) return;
  const int64_t row = idx / c, ch = idx % c;
  int lo = 0, hi = docs;  // cu[lo] <= row < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= row)
      lo = mid;
    else
      hi = mid;
  }
  const int64_t start = cu[lo];
  float acc = 0.f;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t src = row - (k - 1) + j;
    if (src >= start) acc += Ld(w + ch * k + j) * Ld(x + src * x_stride + ch);
  }
  out[row * out_stride + ch] = __float2bfloat16(Silu(acc));
}

template <int K>
void LaunchConvK(bool vec, bf16_t* out, int64_t out_stride, const bf16_t* x, int64_t x_stride,
                 const bf16_t* w, const int32_t* cu, int docs, int64_t t, int64_t c, Stream s) {
  const unsigned runs = Blocks(t, kConvRun);
  const dim3 grid(Blocks((c + 7) / 8, kConvThreads), runs < 65535 ? runs : 65535);
  if (vec)
    causal_conv1d_silu_kernel<K, true>
        <<<grid, kConvThreads, 0, s>>>(out, out_stride, x, x_stride, w, cu, docs, t, c);
  else
    causal_conv1d_silu_kernel<K, false>
        <<<grid, kConvThreads, 0, s>>>(out, out_stride, x, x_stride, w, cu, docs, t, c);
}

// ---- gates -------------------------------------------------------------------------------

__global__ void gated_delta_gates_kernel(float* g, int64_t g_stride, float* beta,
                                         int64_t beta_stride, const bf16_t* a, int64_t a_stride,
                                         const bf16_t* b, int64_t b_stride, const bf16_t* a_log,
                                         const bf16_t* dt_bias, int64_t t, int64_t h) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= t * h) return;
  const int64_t row = idx / h, j = idx % h;
  const float decay = expf(Ld(a_log + j));
  g[row * g_stride + j] = -decay * Softplus(Ld(a + row * a_stride + j) + Ld(dt_bias + j));
  beta[row * beta_stride + j] = Sigmoid(Ld(b + row * b_stride + j));
}

// ---- norms -------------------------------------------------------------------------------

// The norms' operands; with z == nullptr the zero-centred norm x * rstd * (1 + w), otherwise
// the gated norm x * rstd * w * silu(z). A unit is (row, head), heads = cols / d.
struct NormArgs {
  bf16_t* out;
  int64_t out_stride;
  const bf16_t* x;
  int64_t x_stride;
  const bf16_t* z;
  int64_t z_stride;
  const bf16_t* w;
  int64_t rows, heads, d;
  float eps;
};

__device__ __forceinline__ float NormOut(float xv, float rstd, float wv, const bf16_t* z,
                                         float zv) {
  const float y = xv * rstd;
  return z == nullptr ? y * (1.f + wv) : y * wv * Silu(zv);
}

// `group` threads per unit, each holding V 16-byte vectors of it (vector j of thread `sub`
// at element 8 * (sub + j * group), so a group's loads are contiguous). group <= 32: a power
// of two, blockDim / group units per block; else the block is one unit of `group` threads.
// REQUIRES: d % 8 == 0 and 16-byte aligned rows, d <= 8 * V * group.
template <int V>
__global__ void __launch_bounds__(512) row_norm_vec_kernel(NormArgs a, int group) {
  __shared__ float partial[32];
  const int per_block = group <= 32 ? blockDim.x / group : 1;
  const int sub = group <= 32 ? threadIdx.x % group : threadIdx.x;
  const int64_t unit = int64_t{blockIdx.x} * per_block + (group <= 32 ? threadIdx.x / group : 0);
  const bool live = unit < a.rows * a.heads;
  const int64_t row = live ? unit / a.heads : 0, col0 = live ? (unit % a.heads) * a.d : 0;
  const bf16_t* xr = a.x + row * a.x_stride + col0;
  const bf16_t* zr = a.z == nullptr ? nullptr : a.z + row * a.z_stride + col0;
  uint4 xv[V], zv[V];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int64_t e = 8 * (sub + int64_t{j} * group);
    if (!live || e >= a.d) continue;
    xv[j] = *reinterpret_cast<const uint4*>(xr + e);
    if (zr != nullptr) zv[j] = *reinterpret_cast<const uint4*>(zr + e);
    float f[8];
    Unpack8(xv[j], f);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += f[i] * f[i];
  }
  for (int o = (group < 32 ? group : 32) / 2; o > 0; o >>= 1)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (group > 32) {
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
    __syncthreads();
    ss = 0.f;
    for (int i = 0; i < group / 32; ++i) ss += partial[i];
  }
  if (!live) return;
  const float rstd = rsqrtf(ss / static_cast<float>(a.d) + a.eps);
  bf16_t* o = a.out + row * a.out_stride + col0;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int64_t e = 8 * (sub + int64_t{j} * group);
    if (e >= a.d) continue;
    float f[8], wf[8], zf[8] = {};
    Unpack8(xv[j], f);
    Unpack8(*reinterpret_cast<const uint4*>(a.w + e), wf);
    if (zr != nullptr) Unpack8(zv[j], zf);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = NormOut(f[i], rstd, wf[i], zr, zf[i]);
    *reinterpret_cast<uint4*>(o + e) = Pack8(f);
  }
}

// Odd shapes: one warp per unit, each lane striding over it with scalar loads.
__global__ void row_norm_kernel(NormArgs a) {
  const int64_t unit = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (unit >= a.rows * a.heads) return;
  const int64_t row = unit / a.heads, col0 = (unit % a.heads) * a.d;
  const bf16_t* xr = a.x + row * a.x_stride + col0;
  const bf16_t* zr = a.z == nullptr ? nullptr : a.z + row * a.z_stride + col0;
  float ss = 0.f;
  for (int64_t j = lane; j < a.d; j += 32) ss += Ld(xr + j) * Ld(xr + j);
  const float rstd = rsqrtf(WarpSum(ss) / static_cast<float>(a.d) + a.eps);
  bf16_t* o = a.out + row * a.out_stride + col0;
  for (int64_t j = lane; j < a.d; j += 32)
    o[j] = __float2bfloat16(NormOut(Ld(xr + j), rstd, Ld(a.w + j), zr, zr ? Ld(zr + j) : 0.f));
}

cudaError_t LaunchNorm(const NormArgs& a, Stream s) {
  const int64_t units = a.rows * a.heads, vecs = a.d / 8;
  const bool vec = a.d % 8 == 0 && a.x_stride % 8 == 0 && a.out_stride % 8 == 0 &&
                   Aligned16(a.x) && Aligned16(a.out) && Aligned16(a.w) &&
                   (a.z == nullptr || (a.z_stride % 8 == 0 && Aligned16(a.z)));
  if (vec && vecs <= 64) {  // up to a warp per unit, 2 vectors per lane
    int group = 1;
    while (group * 2 < vecs) group *= 2;
    row_norm_vec_kernel<2><<<Blocks(units, kThreads / group), kThreads, 0, s>>>(a, group);
  } else if (vec && vecs <= 4 * 512) {  // warps (or a block) per unit, 4 vectors per lane
    const int group = static_cast<int>((vecs + 4 * 32 - 1) / (4 * 32) * 32);
    const int block = group == 32 ? kThreads : group;
    row_norm_vec_kernel<4><<<Blocks(units, block / group), block, 0, s>>>(a, group);
  } else {
    row_norm_kernel<<<Blocks(units, kWarpsPerBlock), kThreads, 0, s>>>(a);
  }
  return cudaGetLastError();
}

// ---- sigmoid gate ------------------------------------------------------------------------

// One thread per 8 consecutive columns (a 16-byte vector with kVec; cols % 8 == 0 then).
template <bool kVec>
__global__ void sigmoid_gate_kernel(bf16_t* out, int64_t out_stride, const bf16_t* x,
                                    int64_t x_stride, const bf16_t* gate, int64_t gate_stride,
                                    int64_t rows, int64_t cols) {
  const int64_t per_row = (cols + 7) / 8;
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= rows * per_row) return;
  const int64_t r = idx / per_row, c0 = (idx % per_row) * 8;
  const int n = cols - c0 < 8 ? static_cast<int>(cols - c0) : 8;
  float xv[8], gv[8];
  Load8<kVec>(x + r * x_stride + c0, n, xv);
  Load8<kVec>(gate + r * gate_stride + c0, n, gv);
#pragma unroll
  for (int i = 0; i < 8; ++i) xv[i] *= FastSigmoid(gv[i]);
  Store8<kVec>(out + r * out_stride + c0, n, xv);
}

}  // namespace

cudaError_t LaunchCausalConv1dSilu(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                                   const void* w, const int32_t* cu, int docs, int64_t t, int64_t c,
                                   int64_t k, Stream s) {
  auto* o = static_cast<bf16_t*>(out);
  const auto* xb = static_cast<const bf16_t*>(x);
  const auto* wb = static_cast<const bf16_t*>(w);
  const bool vec = c % 8 == 0 && x_stride % 8 == 0 && out_stride % 8 == 0 && Aligned16(x) &&
                   Aligned16(out);
  switch (k) {
    case 1: LaunchConvK<1>(vec, o, out_stride, xb, x_stride, wb, cu, docs, t, c, s); break;
    case 2: LaunchConvK<2>(vec, o, out_stride, xb, x_stride, wb, cu, docs, t, c, s); break;
    case 3: LaunchConvK<3>(vec, o, out_stride, xb, x_stride, wb, cu, docs, t, c, s); break;
    case kConvMaxK:
      LaunchConvK<kConvMaxK>(vec, o, out_stride, xb, x_stride, wb, cu, docs, t, c, s);
      break;
    default:
      causal_conv1d_silu_any_k_kernel<<<Blocks(t * c, kThreads), kThreads, 0, s>>>(
          o, out_stride, xb, x_stride, wb, cu, docs, t, c, k);
  }
  return cudaGetLastError();
}

cudaError_t LaunchGatedDeltaGates(float* g, int64_t g_stride, float* beta, int64_t beta_stride,
                                  const void* a, int64_t a_stride, const void* b, int64_t b_stride,
                                  const void* a_log, const void* dt_bias, int64_t t, int64_t h,
                                  Stream s) {
  gated_delta_gates_kernel<<<Blocks(t * h, kThreads), kThreads, 0, s>>>(
      g, g_stride, beta, beta_stride, static_cast<const bf16_t*>(a), a_stride,
      static_cast<const bf16_t*>(b), b_stride, static_cast<const bf16_t*>(a_log),
      static_cast<const bf16_t*>(dt_bias), t, h);
  return cudaGetLastError();
}

cudaError_t LaunchGatedRmsNorm(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                               const void* z, int64_t z_stride, const void* w, int64_t t,
                               int64_t cols, int64_t d, float eps, Stream s) {
  return LaunchNorm({static_cast<bf16_t*>(out), out_stride, static_cast<const bf16_t*>(x),
                     x_stride, static_cast<const bf16_t*>(z), z_stride,
                     static_cast<const bf16_t*>(w), t, cols / d, d, eps},
                    s);
}

cudaError_t LaunchZeroCentredRmsNorm(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                                     const void* w, int64_t rows, int64_t d, float eps, Stream s) {
  return LaunchNorm({static_cast<bf16_t*>(out), out_stride, static_cast<const bf16_t*>(x),
                     x_stride, nullptr, 0, static_cast<const bf16_t*>(w), rows, 1, d, eps},
                    s);
}

cudaError_t LaunchSigmoidGate(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                              const void* gate, int64_t gate_stride, int64_t rows, int64_t cols,
                              Stream s) {
  const bool vec = cols % 8 == 0 && x_stride % 8 == 0 && gate_stride % 8 == 0 &&
                   out_stride % 8 == 0 && Aligned16(x) && Aligned16(gate) && Aligned16(out);
  const unsigned blocks = Blocks(rows * ((cols + 7) / 8), kThreads);
  auto* o = static_cast<bf16_t*>(out);
  const auto* xb = static_cast<const bf16_t*>(x);
  const auto* gb = static_cast<const bf16_t*>(gate);
  if (vec)
    sigmoid_gate_kernel<true>
        <<<blocks, kThreads, 0, s>>>(o, out_stride, xb, x_stride, gb, gate_stride, rows, cols);
  else
    sigmoid_gate_kernel<false>
        <<<blocks, kThreads, 0, s>>>(o, out_stride, xb, x_stride, gb, gate_stride, rows, cols);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
