// Launchers of the fused LM head + cross-entropy kernels (lm_head_ce.cu), called by
// lm_head_ce_cuda.cc. They return the launch's cudaError_t so the .cu file needs no Status
// (fmt's compile-time format checks do not build under nvcc). Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// weight_sum f32 [1] = sum of row_weights [rows] over rows whose target is in [0, vocab).
cudaError_t LaunchCeWeightSum(const int32_t* targets, const float* row_weights, int64_t rows,
                              int64_t vocab, float* weight_sum, Stream s);

// Rows [row0, row0 + n) of one chunk: logits bf16 [n, ld] (first `vocab` columns valid),
// each read as z = T(logit) (lm_head_ce.h's transform; multiplier 1 and softcap 0 is the
// identity and takes the plain kernel). Writes row_loss[row] = w * (lse(z) - z[target]) (0
// when masked), argmax / correct of z when non-null, and with `backward` overwrites the
// logits with (softmax(z) - onehot) * w / wsum * dz/dlogit.
cudaError_t LaunchCeRows(bool backward, void* logits, int64_t n, int64_t ld, int64_t vocab,
                         const int32_t* targets, const float* row_weights,
                         const float* weight_sum, int64_t row0, float* row_loss,
                         int32_t* argmax, uint8_t* correct, Stream s, float multiplier = 1.f,
                         float softcap = 0.f);

// loss f32 [1] = sum(row_loss [rows]) / weight_sum (0 when weight_sum is 0).
cudaError_t LaunchCeLoss(const float* row_loss, int64_t rows, const float* weight_sum,
                         float* loss, Stream s);

}  // namespace tandem::kernels
