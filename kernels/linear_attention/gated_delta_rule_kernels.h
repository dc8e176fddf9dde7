// Raw launchers of the recurrent gated delta rule kernels (gated_delta_rule.cu): the packed
// forward, called by gated_delta_rule_cuda.cc, and its decode step, called by
// decode_step_cuda.cc, after their checks. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// The largest key / value head dims the recurrent kernel takes (a thread holds one column of
// the [dk, dv] state in registers; a block has max(dk, dv) threads).
constexpr int64_t kGatedDeltaRuleMaxHeadDim = 128;

// q, k: bf16 rows (stride in elements) of hk*dk; v: bf16 rows of hv*dv; g, beta: f32 rows of
// hv; out: bf16 or f32 (out_f32) rows of hv*dv; cu: i32 [docs+1] on the device.
cudaError_t LaunchGatedDeltaRuleRecurrent(void* out, int64_t out_stride, bool out_f32,
                                          const void* q, int64_t q_stride, const void* k,
                                          int64_t k_stride, const void* v, int64_t v_stride,
                                          const float* g, int64_t g_stride, const float* beta,
                                          int64_t beta_stride, const int32_t* cu, int docs, int hk,
                                          int hv, int dk, int dv, bool l2norm, float scale,
                                          Stream s);

// The decode step: n rows of one sequence from state_in to state_out. q, k, v, g, beta, out as
// above (out may be null: the state is updated only); state_in / state_out: f32 [hv, dk, dv]
// (may be equal).
cudaError_t LaunchGatedDeltaRuleStep(void* out, int64_t out_stride, bool out_f32, const void* q,
                                     int64_t q_stride, const void* k, int64_t k_stride,
                                     const void* v, int64_t v_stride, const float* g,
                                     int64_t g_stride, const float* beta, int64_t beta_stride,
                                     const float* state_in, float* state_out, int64_t n, int hk,
                                     int hv, int dk, int dv, bool l2norm, float scale, Stream s);

}  // namespace tandem::kernels
