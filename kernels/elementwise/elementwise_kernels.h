// Raw launchers of the element-wise kernels (elementwise.cu), called by elementwise_cuda.cc.
// They return the launch's cudaError_t so .cu files need no Status. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out = a + b over n elements of bf16 (`is_bf16`) or f32. out may alias a or b.
cudaError_t LaunchResidualAdd(void* out, const void* a, const void* b, int64_t n, bool is_bf16,
                              Stream s);
// bf16 [n] -> f32 [n] (`to_f32`) or f32 [n] -> bf16 [n].
cudaError_t LaunchCast(void* out, const void* in, int64_t n, bool to_f32, Stream s);
// out = in * scale over n elements of bf16 (`is_bf16`) or f32. out may alias in.
cudaError_t LaunchScale(void* out, const void* in, float scale, int64_t n, bool is_bf16,
                        Stream s);

}  // namespace tandem::kernels
