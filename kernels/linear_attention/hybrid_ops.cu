// CUDA versions of the hybrid layers' small ops (hybrid_ops.h). Simple one-pass kernels, fp32
// math and one bf16 rounding per output, like the CPU references; not yet tuned or fused.
//   conv:        one thread per (token, channel); the token's document start is found by a
//                binary search of cu_seqlens, and taps before it read zero (reset per
//                document). Threads of a warp read consecutive channels (coalesced).
//   gates:       one thread per (token, value head).
//   norms:       one warp per normalised row (a head of width d for the gated norm); each lane
//                strides over the row, the sum of squares is a warp shuffle reduction.
//   sigmoid gate: one thread per element.
#include <cuda_bf16.h>

#include "kernels/linear_attention/hybrid_ops_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

__device__ float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ float Silu(float x) { return x * Sigmoid(x); }
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

__global__ void causal_conv1d_silu_kernel(bf16_t* out, int64_t out_stride, const bf16_t* x,
                                          int64_t x_stride, const bf16_t* w, const int32_t* cu,
                                          int docs, int64_t t, int64_t c, int64_t k) {
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

// One warp per (row, head); heads = cols / d. With z == nullptr: the zero-centred norm
// x * rstd * (1 + w); otherwise the gated norm x * rstd * w * silu(z).
__global__ void row_norm_kernel(bf16_t* out, int64_t out_stride, const bf16_t* x, int64_t x_stride,
                                const bf16_t* z, int64_t z_stride, const bf16_t* w, int64_t rows,
                                int64_t heads, int64_t d, float eps) {
  const int64_t unit = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (unit >= rows * heads) return;
  const int64_t row = unit / heads, col0 = (unit % heads) * d;
  const bf16_t* xr = x + row * x_stride + col0;
  float ss = 0.f;
  for (int64_t j = lane; j < d; j += 32) ss += Ld(xr + j) * Ld(xr + j);
  const float rstd = rsqrtf(WarpSum(ss) / static_cast<float>(d) + eps);
  bf16_t* o = out + row * out_stride + col0;
  for (int64_t j = lane; j < d; j += 32) {
    const float y = Ld(xr + j) * rstd;
    o[j] = __float2bfloat16(z == nullptr ? y * (1.f + Ld(w + j))
                                         : y * Ld(w + j) * Silu(Ld(z + row * z_stride + col0 + j)));
  }
}

__global__ void sigmoid_gate_kernel(bf16_t* out, int64_t out_stride, const bf16_t* x,
                                    int64_t x_stride, const bf16_t* gate, int64_t gate_stride,
                                    int64_t rows, int64_t cols) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= rows * cols) return;
  const int64_t r = idx / cols, j = idx % cols;
  out[r * out_stride + j] =
      __float2bfloat16(Ld(x + r * x_stride + j) * Sigmoid(Ld(gate + r * gate_stride + j)));
}

}  // namespace

cudaError_t LaunchCausalConv1dSilu(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                                   const void* w, const int32_t* cu, int docs, int64_t t, int64_t c,
                                   int64_t k, Stream s) {
  causal_conv1d_silu_kernel<<<Blocks(t * c, kThreads), kThreads, 0, s>>>(
      static_cast<bf16_t*>(out), out_stride, static_cast<const bf16_t*>(x), x_stride,
      static_cast<const bf16_t*>(w), cu, docs, t, c, k);
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
  const int64_t units = t * (cols / d);
  row_norm_kernel<<<Blocks(units, kWarpsPerBlock), kThreads, 0, s>>>(
      static_cast<bf16_t*>(out), out_stride, static_cast<const bf16_t*>(x), x_stride,
      static_cast<const bf16_t*>(z), z_stride, static_cast<const bf16_t*>(w), t, cols / d, d, eps);
  return cudaGetLastError();
}

cudaError_t LaunchZeroCentredRmsNorm(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                                     const void* w, int64_t rows, int64_t d, float eps, Stream s) {
  row_norm_kernel<<<Blocks(rows, kWarpsPerBlock), kThreads, 0, s>>>(
      static_cast<bf16_t*>(out), out_stride, static_cast<const bf16_t*>(x), x_stride, nullptr, 0,
      static_cast<const bf16_t*>(w), rows, 1, d, eps);
  return cudaGetLastError();
}

cudaError_t LaunchSigmoidGate(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                              const void* gate, int64_t gate_stride, int64_t rows, int64_t cols,
                              Stream s) {
  sigmoid_gate_kernel<<<Blocks(rows * cols, kThreads), kThreads, 0, s>>>(
      static_cast<bf16_t*>(out), out_stride, static_cast<const bf16_t*>(x), x_stride,
      static_cast<const bf16_t*>(gate), gate_stride, rows, cols);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
