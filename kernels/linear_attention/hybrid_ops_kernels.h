// Raw launchers of the hybrid layers' small CUDA kernels (hybrid_ops.cu), called by
// hybrid_ops_cuda.cc after its checks. They return the launch's cudaError_t so the .cu file
// needs no Status. Row views are passed as (pointer, row stride in elements). Internal to
// kernels/. Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// out, x: bf16 [t, c] row views; w: bf16 [c, k]; cu: i32 [docs+1] on the device.
cudaError_t LaunchCausalConv1dSilu(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                                   const void* w, const int32_t* cu, int docs, int64_t t, int64_t c,
                                   int64_t k, Stream s);
// g, beta: f32 [t, h] row views; a, b: bf16 [t, h] row views; a_log, dt_bias: bf16 [h].
cudaError_t LaunchGatedDeltaGates(float* g, int64_t g_stride, float* beta, int64_t beta_stride,
                                  const void* a, int64_t a_stride, const void* b, int64_t b_stride,
                                  const void* a_log, const void* dt_bias, int64_t t, int64_t h,
                                  Stream s);
// out, x, z: bf16 [t, cols] row views; w: bf16 [d], d divides cols.
cudaError_t LaunchGatedRmsNorm(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                               const void* z, int64_t z_stride, const void* w, int64_t t,
                               int64_t cols, int64_t d, float eps, Stream s);
// out, x: bf16 [rows, d] row views; w: bf16 [d].
cudaError_t LaunchZeroCentredRmsNorm(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                                     const void* w, int64_t rows, int64_t d, float eps, Stream s);
// out, x, gate: bf16 [rows, cols] row views; out may alias x.
cudaError_t LaunchSigmoidGate(void* out, int64_t out_stride, const void* x, int64_t x_stride,
                              const void* gate, int64_t gate_stride, int64_t rows, int64_t cols,
                              Stream s);

}  // namespace tandem::kernels
