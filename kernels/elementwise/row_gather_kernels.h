// Raw launcher of the row gather (row_gather.cu), called by row_gather_cuda.cc. Returns the
// launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out [n, row_bytes] <- table [m, row_bytes] rows `rows` i32 [n] (zero bytes if invalid).
cudaError_t LaunchRowGather(void* out, const int32_t* rows, const void* table, int64_t n,
                            int64_t m, int64_t row_bytes, Stream s);

}  // namespace tandem::kernels
