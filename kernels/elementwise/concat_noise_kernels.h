// Raw launcher of the concat+noise kernel (concat_noise.cu), called by concat_noise_cuda.cc.
// Returns the launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out: bf16 [tokens, k * h] <- inputs[i]: bf16 [tokens, h] plus Philox noise (concat_noise.h).
// REQUIRES: 1 <= k <= 16.
cudaError_t LaunchConcatNoise(void* out, const void* const* inputs, int k, int64_t tokens,
                              int64_t h, float noise_std, uint64_t seed, uint64_t offset, Stream s);

}  // namespace tandem::kernels
