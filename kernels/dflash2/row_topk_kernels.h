// Raw launcher of the row top-k of transformed logits (row_topk.cu), called by
// row_topk_cuda.cc and by the fused LM head + CE (kernels/loss/lm_head_ce_cuda.cc) on each
// chunk's logits. Returns the launch's cudaError_t so the .cu file needs no Status.
// Internal to kernels/. Thread-safety: asynchronous on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels::dflash2 {

// logits: bf16 (is_bf16) or f32 [rows, vocab] with row stride ld (elements); ids: i32
// [rows, k] and values: f32 [rows, k] (nullable), row r at ids + r * k. REQUIRES
// 1 <= k <= min(vocab, kLogitsTopKMax) (row_topk.h), multiplier > 0, softcap >= 0.
cudaError_t LaunchRowTopK(const void* logits, bool is_bf16, int64_t rows, int64_t ld, int64_t vocab,
                          float multiplier, float softcap, int k, int32_t* ids, float* values,
                          Stream s);

}  // namespace tandem::kernels::dflash2
