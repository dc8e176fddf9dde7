// Raw launchers of the decode-step kernels (decode_step.cu), called by decode_step_cuda.cc
// after its checks. Row views are (pointer, row stride in elements). Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out, x: bf16 [n, c] row views; state: bf16 [k-1, c]; w: bf16 [c, k]; history: bf16 [r, c].
cudaError_t LaunchCausalConv1dSiluStep(void* out, int64_t out_stride, void* history, int64_t r,
                                       const void* x, int64_t x_stride, const void* state,
                                       const void* w, int64_t n, int64_t c, int64_t k, Stream s);

// q, k: bf16 rows of hk*dk; v: bf16 rows of hv*dv; g, beta: f32 rows of hv; out: bf16 or f32
// (out_f32) rows of hv*dv, or null; state_in / state_out: f32 [hv, dk, dv] (may be equal).
cudaError_t LaunchGatedDeltaRuleStep(void* out, int64_t out_stride, bool out_f32, const void* q,
                                     int64_t q_stride, const void* k, int64_t k_stride,
                                     const void* v, int64_t v_stride, const float* g,
                                     int64_t g_stride, const float* beta, int64_t beta_stride,
                                     const float* state_in, float* state_out, int64_t n, int hk,
                                     int hv, int dk, int dv, bool l2norm, float scale, Stream s);

}  // namespace tandem::kernels
