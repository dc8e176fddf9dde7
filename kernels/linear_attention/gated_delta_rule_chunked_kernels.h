// Raw launcher of the chunked gated delta rule kernels (gated_delta_rule_chunked.cu), called
// by gated_delta_rule_chunked_cuda.cc after its checks. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// q, k: bf16 rows (stride in elements, a multiple of 8; 16-byte aligned) of hk*128; v: bf16
// rows of hv*128; g, beta: f32 rows of hv; out: bf16 or f32 rows of hv*128; cu: i32
// [docs+1] on the device; workspace: GatedDeltaRuleChunkedWorkspaceBytes(tokens, hk, hv, 128,
// 128) bytes. `stages` < 2 launches kernel 1 alone (for timing the two apart).
cudaError_t LaunchGatedDeltaRuleChunked(void* out, int64_t out_stride, bool out_f32,
                                        const void* q, int64_t q_stride, const void* k,
                                        int64_t k_stride, const void* v, int64_t v_stride,
                                        const float* g, int64_t g_stride, const float* beta,
                                        int64_t beta_stride, const int32_t* cu, int docs,
                                        int64_t tokens, int hk, int hv, bool l2norm, float scale,
                                        void* workspace, Stream s, int stages = 2);

}  // namespace tandem::kernels
