// CUDA gated delta rule, recurrent form (the first, simple CUDA version; the chunked WY /
// UT-transform kernel with tensor-core work per chunk is the fast one still to write).
// One block per (value head, document), max(dk, dv) threads rounded up to a warp. Thread j
// owns column j of the state S [dk, dv] in registers (fp32), so per token every update
// (S *= exp(g), S^T k, S += k delta^T, S^T q) is thread-local; only q and k, L2-normalised
// with a block reduction, go through shared memory. Documents are independent blocks, so the
// state starts at zero in each.
#include <cuda_bf16.h>

#include "kernels/linear_attention/gated_delta_rule_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kMaxDim = static_cast<int>(kGatedDeltaRuleMaxHeadDim);

__device__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums a and b over the block (blockDim.x <= kMaxDim); every thread gets the totals.
__device__ void BlockSum2(float* a, float* b, float (*scratch)[2]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const float wa = WarpSum(*a), wb = WarpSum(*b);
  if (lane == 0) {
    scratch[warp][0] = wa;
    scratch[warp][1] = wb;
  }
  __syncthreads();
  float ta = 0.f, tb = 0.f;
  for (int w = 0; w < warps; ++w) {
    ta += scratch[w][0];
    tb += scratch[w][1];
  }
  *a = ta;
  *b = tb;
}

__global__ void __launch_bounds__(kMaxDim)
    gated_delta_rule_recurrent_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                                      int64_t q_stride, const bf16_t* k, int64_t k_stride,
                                      const bf16_t* v, int64_t v_stride, const float* g,
                                      int64_t g_stride, const float* beta, int64_t beta_stride,
                                      const int32_t* cu, int hk, int hv, int dk, int dv,
                                      bool l2norm, float scale) {
  __shared__ float sq[kMaxDim], sk[kMaxDim];
  __shared__ float scratch[kMaxDim / 32][2];
  const int vh = blockIdx.x, doc = blockIdx.y, kh = vh / (hv / hk), j = threadIdx.x;
  const int64_t begin = cu[doc], end = cu[doc + 1];
  float state[kMaxDim];  // column j of S
#pragma unroll
  for (int i = 0; i < kMaxDim; ++i) state[i] = 0.f;
  for (int64_t t = begin; t < end; ++t) {
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
      const int64_t at = t * out_stride + vh * dv + j;
      if (out_f32)
        static_cast<float*>(out)[at] = o;
      else
        static_cast<bf16_t*>(out)[at] = __float2bfloat16(o);
    }
    __syncthreads();  // sq, sk and scratch are rewritten for the next token
  }
}

}  // namespace

cudaError_t LaunchGatedDeltaRuleRecurrent(void* out, int64_t out_stride, bool out_f32,
                                          const void* q, int64_t q_stride, const void* k,
                                          int64_t k_stride, const void* v, int64_t v_stride,
                                          const float* g, int64_t g_stride, const float* beta,
                                          int64_t beta_stride, const int32_t* cu, int docs, int hk,
                                          int hv, int dk, int dv, bool l2norm, float scale,
                                          Stream s) {
  const int threads = ((dk > dv ? dk : dv) + 31) / 32 * 32;
  const dim3 grid(static_cast<unsigned>(hv), static_cast<unsigned>(docs));
  gated_delta_rule_recurrent_kernel<<<grid, threads, 0, s>>>(
      out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
      static_cast<const bf16_t*>(k), k_stride, static_cast<const bf16_t*>(v), v_stride, g, g_stride,
      beta, beta_stride, cu, hk, hv, dk, dv, l2norm, scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
