// Raw launchers of the RMSNorm kernels (rmsnorm.cu), called by rmsnorm_cuda.cc. They return
// the launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// y: bf16 [rows, h], rstd: f32 [rows] (nullable), x: bf16 [rows, h], w: bf16 [h].
// REQUIRES: 1 <= h <= kRmsNormMaxH (rmsnorm.h).
cudaError_t LaunchRmsNormForward(void* y, float* rstd, const void* x, const void* w, int64_t rows,
                                 int64_t h, float eps, Stream s);
// dx: bf16 [rows, h]; dw: f32 [h] (+=); workspace: f32 [workspace_rows, h] (one partial dw
// row per block: at most workspace_rows blocks run).
cudaError_t LaunchRmsNormBackward(void* dx, float* dw, const void* dy, const void* x, const void* w,
                                  const float* rstd, float* workspace, int64_t workspace_rows,
                                  int64_t rows, int64_t h, Stream s);

// dw: f32 [h] += the sum over the p rows of partial: f32 [p, h], in a fixed order
// (deterministic, no atomics). The one dw reduction of every norm backward (rmsnorm.cu,
// fused_norm.cu).
cudaError_t LaunchRmsNormDwReduce(float* dw, const float* partial, int64_t p, int64_t h,
                                  Stream s);

}  // namespace tandem::kernels
