// Raw launcher of the row argmax (row_argmax.cu), called by row_argmax_cuda.cc. Returns the
// launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out[r] = first argmax of row r of x [rows, v] (NaN skipped); x is f32 or bf16.
cudaError_t LaunchRowArgmax(int32_t* out, const void* x, DType dtype, int64_t rows, int64_t v,
                            Stream s);

}  // namespace tandem::kernels
