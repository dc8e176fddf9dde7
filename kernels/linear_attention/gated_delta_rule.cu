// CUDA gated delta rule, recurrent form, for any head dims <= 128 (the chunked tensor-core
// kernel, gated_delta_rule_chunked.cu, is the fast one for 128 / 128). One block per value
// head (and document), max(dk, dv) threads rounded up to a warp. Thread j owns column j of the
// state S [dk, dv] in registers (fp32), so per token every update (S *= exp(g), S^T k,
// S += k delta^T, S^T q) is thread-local; only q and k, L2-normalised with a block reduction,
// go through shared memory. Two kernels share that recurrence (DeltaRuleScan):
//   forward:     one block per (value head, document) of a packed batch; the state starts at
//                zero in each document and is dropped at its end.
//   decode step: one block per value head over the n new tokens of one sequence, starting from
//                state_in and ending in state_out (loaded once, stored once, so state_in may
//                be state_out); outputs optional (the replay updates the state only).
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

// The token rows both kernels read and write (row views: pointer, stride in elements).
struct Rows {
  void* out;  // bf16 or f32 (out_f32) [t, hv * dv]; the decode step's may be null
  int64_t out_stride;
  bool out_f32;
  const bf16_t* q;  // [t, hk * dk]
  int64_t q_stride;
  const bf16_t* k;  // [t, hk * dk]
  int64_t k_stride;
  const bf16_t* v;  // [t, hv * dv]
  int64_t v_stride;
  const float* g;  // [t, hv]
  int64_t g_stride;
  const float* beta;  // [t, hv]
  int64_t beta_stride;
};

// The recurrence of value head vh (key head kh) over tokens [begin, end), thread j holding
// column j of S in `state`. kNullableOut: `out` may be null (then nothing is written).
template <bool kNullableOut>
__device__ __forceinline__ void DeltaRuleScan(const Rows& r, int64_t begin, int64_t end, int vh,
                                              int kh, int dk, int dv, bool l2norm, float scale,
                                              float (&state)[kMaxDim]) {
  __shared__ float sq[kMaxDim], sk[kMaxDim];
  __shared__ float scratch[kMaxDim / 32][2];
  const int j = threadIdx.x;
  for (int64_t t = begin; t < end; ++t) {
    const float qi = j < dk ? __bfloat162float(r.q[t * r.q_stride + kh * dk + j]) : 0.f;
    const float ki = j < dk ? __bfloat162float(r.k[t * r.k_stride + kh * dk + j]) : 0.f;
    float qq = qi * qi, kk = ki * ki;
    BlockSum2(&qq, &kk, scratch);
    const float rq = l2norm ? rsqrtf(qq + 1e-6f) : 1.f, rk = l2norm ? rsqrtf(kk + 1e-6f) : 1.f;
    if (j < dk) {
      sq[j] = qi * rq * scale;
      sk[j] = ki * rk;
    }
    __syncthreads();
    if (j < dv) {
      const float decay = expf(r.g[t * r.g_stride + vh]), b = r.beta[t * r.beta_stride + vh];
      float kv = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxDim; ++i) {
        if (i < dk) {
          state[i] *= decay;
          kv += state[i] * sk[i];
        }
      }
      const float delta = b * (__bfloat162float(r.v[t * r.v_stride + vh * dv + j]) - kv);
      float o = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxDim; ++i) {
        if (i < dk) {
          state[i] += sk[i] * delta;
          o += state[i] * sq[i];
        }
      }
      if (!kNullableOut || r.out != nullptr) {
        const int64_t at = t * r.out_stride + vh * dv + j;
        if (r.out_f32)
          static_cast<float*>(r.out)[at] = o;
        else
          static_cast<bf16_t*>(r.out)[at] = __float2bfloat16(o);
      }
    }
    __syncthreads();  // sq, sk and scratch are rewritten for the next token
  }
}

__global__ void __launch_bounds__(kMaxDim)
    gated_delta_rule_recurrent_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                                      int64_t q_stride, const bf16_t* k, int64_t k_stride,
                                      const bf16_t* v, int64_t v_stride, const float* g,
                                      int64_t g_stride, const float* beta, int64_t beta_stride,
                                      const int32_t* cu, int hk, int hv, int dk, int dv,
                                      bool l2norm, float scale) {
  const int vh = blockIdx.x, doc = blockIdx.y, kh = vh / (hv / hk);
  float state[kMaxDim];  // column threadIdx.x of S
#pragma unroll
  for (int i = 0; i < kMaxDim; ++i) state[i] = 0.f;
  const Rows r{out, out_stride, out_f32, q,        q_stride, k,          k_stride,
               v,   v_stride,   g,       g_stride, beta,     beta_stride};
  DeltaRuleScan<false>(r, cu[doc], cu[doc + 1], vh, kh, dk, dv, l2norm, scale, state);
}

__global__ void __launch_bounds__(kMaxDim)
    gated_delta_rule_step_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                                 int64_t q_stride, const bf16_t* k, int64_t k_stride,
                                 const bf16_t* v, int64_t v_stride, const float* g,
                                 int64_t g_stride, const float* beta, int64_t beta_stride,
                                 const float* state_in, float* state_out, int64_t n, int hk, int hv,
                                 int dk, int dv, bool l2norm, float scale) {
  const int vh = blockIdx.x, kh = vh / (hv / hk), j = threadIdx.x;
  const int64_t plane = int64_t{dk} * dv;
  float state[kMaxDim];  // column j of S
#pragma unroll
  for (int i = 0; i < kMaxDim; ++i)
    state[i] = (i < dk && j < dv) ? state_in[vh * plane + int64_t{i} * dv + j] : 0.f;
  const Rows r{out, out_stride, out_f32, q,        q_stride, k,          k_stride,
               v,   v_stride,   g,       g_stride, beta,     beta_stride};
  DeltaRuleScan<true>(r, 0, n, vh, kh, dk, dv, l2norm, scale, state);
  if (j < dv) {
#pragma unroll
    for (int i = 0; i < kMaxDim; ++i)
      if (i < dk) state_out[vh * plane + int64_t{i} * dv + j] = state[i];
  }
}

int Threads(int dk, int dv) { return ((dk > dv ? dk : dv) + 31) / 32 * 32; }

}  // namespace

cudaError_t LaunchGatedDeltaRuleRecurrent(void* out, int64_t out_stride, bool out_f32,
                                          const void* q, int64_t q_stride, const void* k,
                                          int64_t k_stride, const void* v, int64_t v_stride,
                                          const float* g, int64_t g_stride, const float* beta,
                                          int64_t beta_stride, const int32_t* cu, int docs, int hk,
                                          int hv, int dk, int dv, bool l2norm, float scale,
                                          Stream s) {
  const dim3 grid(static_cast<unsigned>(hv), static_cast<unsigned>(docs));
  gated_delta_rule_recurrent_kernel<<<grid, Threads(dk, dv), 0, s>>>(
      out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
      static_cast<const bf16_t*>(k), k_stride, static_cast<const bf16_t*>(v), v_stride, g, g_stride,
      beta, beta_stride, cu, hk, hv, dk, dv, l2norm, scale);
  return cudaGetLastError();
}

cudaError_t LaunchGatedDeltaRuleStep(void* out, int64_t out_stride, bool out_f32, const void* q,
                                     int64_t q_stride, const void* k, int64_t k_stride,
                                     const void* v, int64_t v_stride, const float* g,
                                     int64_t g_stride, const float* beta, int64_t beta_stride,
                                     const float* state_in, float* state_out, int64_t n, int hk,
                                     int hv, int dk, int dv, bool l2norm, float scale, Stream s) {
  gated_delta_rule_step_kernel<<<static_cast<unsigned>(hv), Threads(dk, dv), 0, s>>>(
      out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
      static_cast<const bf16_t*>(k), k_stride, static_cast<const bf16_t*>(v), v_stride, g, g_stride,
      beta, beta_stride, state_in, state_out, n, hk, hv, dk, dv, l2norm, scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
