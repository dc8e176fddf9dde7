// Raw launchers of the hybrid layers' fused FP8 producers (hybrid_ops_fp8.cu), called by
// hybrid_ops_fp8_cuda.cc after its checks. Row views are (pointer, row stride in elements);
// the e4m3 output is codes q [mp, cols] and scales at scale[g * mp + r] (kernels/gemm/fp8.h).
// Internal to kernels/. Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// The gated norm's largest heads per row on CUDA when d != 128 (one f32 rstd per head in
// shared memory).
inline constexpr int64_t kGatedNormFp8MaxHeads = 8192;

// x, z: bf16 [t, cols] row views; w: bf16 [d], d divides cols; mp = Fp8PaddedRows(t).
cudaError_t LaunchGatedRmsNormFp8(const void* x, int64_t x_stride, const void* z,
                                  int64_t z_stride, const void* w, int64_t t, int64_t cols,
                                  int64_t d, float eps, int64_t mp, uint8_t* q, float* scale,
                                  Stream s);
// x, gate: bf16 [t * heads, d] row views; out row r = rows r*heads .. r*heads+heads-1.
cudaError_t LaunchSigmoidGateFp8(const void* x, int64_t x_stride, const void* gate,
                                 int64_t gate_stride, int64_t t, int64_t heads, int64_t d,
                                 int64_t mp, uint8_t* q, float* scale, Stream s);

}  // namespace tandem::kernels
