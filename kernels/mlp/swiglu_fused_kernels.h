// Raw launcher of the fused SwiGLU recompute + backward kernel (swiglu_fused.cu), called by
// swiglu_fused_cuda.cc; returns the launch's cudaError_t. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/mlp/swiglu_kernels.h"

namespace tandem::kernels {

// act, dgate, dup from dout, gate, up; all bf16 [rows, cols] with row strides.
cudaError_t LaunchSwiGluRecomputeBackward(Bf16Rows act, Bf16Rows dgate, Bf16Rows dup,
                                          Bf16Rows dout, Bf16Rows gate, Bf16Rows up,
                                          int64_t rows, int64_t cols, Stream s);

}  // namespace tandem::kernels
