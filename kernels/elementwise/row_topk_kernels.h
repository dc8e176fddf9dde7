// Raw launcher of the row top-k (row_topk.cu), called by row_topk_cuda.cc. Returns the
// launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// ids/vals [rows, k] = the k largest of each row of x [rows, v] (row_topk.h), by index.
cudaError_t LaunchRowTopK(int32_t* ids, float* vals, const float* x, int64_t rows, int64_t v,
                          int64_t k, Stream s);

}  // namespace tandem::kernels
