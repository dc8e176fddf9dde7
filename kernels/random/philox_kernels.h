// Raw launcher of the Philox fill kernel (philox.cu), called by philox_cuda.cc. Returns the
// launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out: f32 [n]
cudaError_t LaunchPhiloxUniformFill(float* out, int64_t n, float lo, float hi, uint64_t seed,
                                    uint64_t offset, Stream s);

}  // namespace tandem::kernels
