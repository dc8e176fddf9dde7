// CUDA decode steps of Gated DeltaNet (decode_step.h). NOT YET RUN ON A GPU: written and
// compiled in a session without a device; the CPU twins in decode_step_cpu.cc are tested.
//   conv step: one thread per (row, channel) of max(n, R) rows; a thread computes out[row]
//              (row < n) from the K taps of [state; x] and copies cat row (K-1+n-R+row) into
//              history[row] (row < R). Warps read consecutive channels (coalesced).
//   delta rule step: the recurrent kernel of gated_delta_rule.cu for one sequence, starting
//              from state_in: one block per value head, thread j holds column j of S [dk, dv]
//              in registers (loaded once, stored once, so state_in may be state_out), q and k
//              L2-normalised with a block reduction through shared memory.
#include <cuda_bf16.h>

#include "kernels/linear_attention/decode_step_kernels.h"
#include "kernels/linear_attention/gated_delta_rule_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kMaxDim = static_cast<int>(kGatedDeltaRuleMaxHeadDim);

__device__ float Silu(float x) { return x * (1.f / (1.f + expf(-x))); }

__global__ void conv_step_kernel(bf16_t* out, int64_t out_stride, bf16_t* history, int64_t r,
                                 const bf16_t* x, int64_t x_stride, const bf16_t* state,
                                 const bf16_t* w, int64_t n, int64_t c, int64_t k) {
  const int64_t ch = int64_t{blockIdx.x} * blockDim.x + threadIdx.x, row = blockIdx.y;
  if (ch >= c) return;
  auto cat = [&](int64_t i) {  // row i of [state; x]
    return i < k - 1 ? state[i * c + ch] : x[(i - (k - 1)) * x_stride + ch];
  };
  if (row < n) {
    float acc = 0.f;
    for (int64_t j = 0; j < k; ++j)
      acc += __bfloat162float(w[ch * k + j]) * __bfloat162float(cat(row + j));
    out[row * out_stride + ch] = __float2bfloat16(Silu(acc));
  }
  if (row < r) history[row * c + ch] = cat(k - 1 + n - r + row);
}

__device__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums a and b over the block; every thread gets the totals.
__device__ void BlockSum2(float* a, float* b, float (*scratch)[2]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const float wa = WarpSum(*a), wb = WarpSum(*b);
  if (lane == 0) {
    scratch[warp][0] = wa;
    scratch[warp][1] = wb;
  }
  __syncthreads();
  float ta = 0.f, tb = 0.f;
  for (int i = 0; i < warps; ++i) {
    ta += scratch[i][0];
    tb += scratch[i][1];
  }
  *a = ta;
  *b = tb;
}

__global__ void __launch_bounds__(kMaxDim)
    gated_delta_rule_step_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                                 int64_t q_stride, const bf16_t* k, int64_t k_stride,
                                 const bf16_t* v, int64_t v_stride, const float* g,
                                 int64_t g_stride, const float* beta, int64_t beta_stride,
                                 const float* state_in, float* state_out, int64_t n, int hk, int hv,
                                 int dk, int dv, bool l2norm, float scale) {
  __shared__ float sq[kMaxDim], sk[kMaxDim];
  __shared__ float scratch[kMaxDim / 32][2];
  const int vh = blockIdx.x, kh = vh / (hv / hk), j = threadIdx.x;
  const int64_t plane = int64_t{dk} * dv;
  float state[kMaxDim];  // column j of S
#pragma unroll
  for (int i = 0; i < kMaxDim; ++i)
    state[i] = (i < dk && j < dv) ? state_in[vh * plane + int64_t{i} * dv + j] : 0.f;
  for (int64_t t = 0; t < n; ++t) {
    const float qi = j < dk ? __bfloat162float(q[t * q_stride + kh * dk + j]) : 0.f;
    const float ki = j < dk ? __bfloat162float(k[t * k_stride + kh * dk + j]) : 0.f;
    float qq = qi * qi, kk = ki * ki;
    BlockSum2(&qq, &kk, scratch);
    const float rq = l2norm ? rsqrtf(qq + 1e-6f) : 1.f, rk = l2norm ? rsqrtf(kk + 1e-6f) : 1.f;
    if (j < dk) {
      sq[j] = qi * rq * scale;
      sk[j] = ki * rk;
    }
    __syncthreads();
    if (j < dv) {
      const float decay = expf(g[t * g_stride + vh]), b = beta[t * beta_stride + vh];
      float kv = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxDim; ++i) {
        if (i < dk) {
          state[i] *= decay;
          kv += state[i] * sk[i];
        }
      }
      const float delta = b * (__bfloat162float(v[t * v_stride + vh * dv + j]) - kv);
      float o = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxDim; ++i) {
        if (i < dk) {
          state[i] += sk[i] * delta;
          o += state[i] * sq[i];
        }
      }
      if (out != nullptr) {
        const int64_t at = t * out_stride + vh * dv + j;
        if (out_f32)
          static_cast<float*>(out)[at] = o;
        else
          static_cast<bf16_t*>(out)[at] = __float2bfloat16(o);
      }
    }
    __syncthreads();  // sq, sk and scratch are rewritten for the next token
  }
  if (j < dv) {
#pragma unroll
    for (int i = 0; i < kMaxDim; ++i)
      if (i < dk) state_out[vh * plane + int64_t{i} * dv + j] = state[i];
  }
}

}  // namespace

cudaError_t LaunchCausalConv1dSiluStep(void* out, int64_t out_stride, void* history, int64_t r,
                                       const void* x, int64_t x_stride, const void* state,
                                       const void* w, int64_t n, int64_t c, int64_t k, Stream s) {
  const dim3 grid(static_cast<unsigned>((c + kThreads - 1) / kThreads),
                  static_cast<unsigned>(n > r ? n : r));
  conv_step_kernel<<<grid, kThreads, 0, s>>>(
      static_cast<bf16_t*>(out), out_stride, static_cast<bf16_t*>(history), r,
      static_cast<const bf16_t*>(x), x_stride, static_cast<const bf16_t*>(state),
      static_cast<const bf16_t*>(w), n, c, k);
  return cudaGetLastError();
}

cudaError_t LaunchGatedDeltaRuleStep(void* out, int64_t out_stride, bool out_f32, const void* q,
                                     int64_t q_stride, const void* k, int64_t k_stride,
                                     const void* v, int64_t v_stride, const float* g,
                                     int64_t g_stride, const float* beta, int64_t beta_stride,
                                     const float* state_in, float* state_out, int64_t n, int hk,
                                     int hv, int dk, int dv, bool l2norm, float scale, Stream s) {
  const int threads = ((dk > dv ? dk : dv) + 31) / 32 * 32;
  gated_delta_rule_step_kernel<<<static_cast<unsigned>(hv), threads, 0, s>>>(
      out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
      static_cast<const bf16_t*>(k), k_stride, static_cast<const bf16_t*>(v), v_stride, g, g_stride,
      beta, beta_stride, state_in, state_out, n, hk, hv, dk, dv, l2norm, scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
