// Launchers of the GradNorm / AdamW kernels (adamw.cu), called by adamw_cuda.cc. They
// return the launch's cudaError_t so the .cu file needs no Status. Internal to kernels/.
// Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/optim/adamw_types.h"
#include "kernels/core/dtype.h"

namespace tandem::kernels {

// grads f32 [n] -> stats f32 [4] via partials f32 [kGradNormWorkspaceSize].
cudaError_t LaunchGradNorm(const float* grads, int64_t n, float max_norm, float* partials,
                           float* stats, Stream s);

// params/grads/m/v f32 [n], params_bf16 bf16 [n] or null; reads stats [4] and step [1].
cudaError_t LaunchAdamW(const AdamWConfig& cfg, float* params, const float* grads, float* m,
                        float* v, void* params_bf16, int64_t n, const float* stats,
                        const int32_t* step, Stream s);

// step[0] += 1 unless stats[kGradStatsNonFinite] != 0.
cudaError_t LaunchAdamWFinishStep(const float* stats, int32_t* step, Stream s);

}  // namespace tandem::kernels
