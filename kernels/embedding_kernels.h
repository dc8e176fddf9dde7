// Raw launcher of the embedding gather (embedding.cu), called by embedding_cuda.cc. Returns
// the launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace tandem::kernels {

// out: bf16 [tokens, h] <- weight: bf16 [vocab, h] rows ids: i32 [tokens] (zero if invalid).
cudaError_t LaunchEmbeddingForward(void* out, const int32_t* ids, const void* weight,
                                   int64_t tokens, int64_t vocab, int64_t h, Stream s);

}  // namespace tandem::kernels
