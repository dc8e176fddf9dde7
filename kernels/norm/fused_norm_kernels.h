// Raw launchers of the fused RMSNorm kernels (fused_norm.cu), called by fused_norm_cuda.cc.
// They return the launch's cudaError_t so the .cu file needs no Status. Shapes as in
// kernels/norm/fused_norm.h; rows = T * heads for the per-head ops. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels {

// inv_freq: host table [d / 2] (RopeInvFreq); REQUIRES d even, d / 2 <= 256.
cudaError_t LaunchRmsNormRopeForward(void* y, float* rstd, const void* x, const void* w,
                                     const int32_t* pos, const float* inv_freq, int64_t tokens,
                                     int64_t heads, int64_t d, float eps, Stream s);
// workspace: f32 [workspace_rows, d] (one partial dw row per block).
cudaError_t LaunchRopeRmsNormBackward(void* dx, float* dw, const void* dy, const void* x,
                                      const void* w, const float* rstd, const int32_t* pos,
                                      const float* inv_freq, float* workspace,
                                      int64_t workspace_rows, int64_t tokens, int64_t heads,
                                      int64_t d, Stream s);
// REQUIRES 1 <= h <= kRmsNormMaxH. b and hsum both null: y = rmsnorm(a) only.
cudaError_t LaunchAddRmsNormForward(void* hsum, void* y, float* rstd, const void* a,
                                    const void* b, const void* w, int64_t rows, int64_t h,
                                    float eps, Stream s);
// dy is f32 when dy_f32, else bf16; workspace: f32 [workspace_rows, h].
cudaError_t LaunchRmsNormBackwardAdd(void* dres, float* dw, const void* dy, bool dy_f32,
                                     const void* x, const void* w, const float* rstd,
                                     float* workspace, int64_t workspace_rows, int64_t rows,
                                     int64_t h, Stream s);

}  // namespace tandem::kernels
