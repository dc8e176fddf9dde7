// Raw launcher of the conv decode-step kernel (decode_step.cu), called by decode_step_cuda.cc
// after its checks (the delta rule step's is in gated_delta_rule_kernels.h). Row views are
// (pointer, row stride in elements). Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out, x: bf16 [n, c] row views; state: bf16 [k-1, c]; w: bf16 [c, k]; history: bf16 [r, c].
cudaError_t LaunchCausalConv1dSiluStep(void* out, int64_t out_stride, void* history, int64_t r,
                                       const void* x, int64_t x_stride, const void* state,
                                       const void* w, int64_t n, int64_t c, int64_t k, Stream s);

}  // namespace tandem::kernels
