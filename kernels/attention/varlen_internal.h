// Internal to kernels/attention: CUDA launchers behind CausalVarlenAttention
// (varlen_attention.cu), used by the cuDNN wrapper (cudnn_sdpa.cc).
// Thread-safety: reentrant launchers; they only enqueue work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels::attention_internal {

// The simple fallback: one warp per (token, query head), online softmax over the token's
// causal document prefix. Any T, docs, GQA; head_dim 64, 128 or 256 (else
// cudaErrorInvalidValue). lse may be null.
// (Plain arguments: .cu files stay free of fmt, which nvcc 13 cannot compile.)
cudaError_t LaunchVarlenFallback(int64_t t, int64_t docs, int64_t hq, int64_t hk, int64_t d, const void* q, const void* k, const void* v,
                            const int32_t* cu_seqlens, float scale, void* out, float* lse,
                                      Stream stream);

// cuDNN's per-document tensors from cu_seqlens [docs+1]: seq_len [docs] (i32) and ragged
// offsets [docs+1] (i64, in elements) of Q/O (x hq*d), K/V (x hk*d) and Stats (x hq).
cudaError_t LaunchCudnnAux(int64_t docs, int64_t hq, int64_t hk, int64_t d, const int32_t* cu_seqlens, int32_t* seq_len,
                      int64_t* ragged_q, int64_t* ragged_kv, int64_t* ragged_stats,
                           Stream stream);

}  // namespace tandem::kernels::attention_internal
