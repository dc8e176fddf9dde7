// Launch function of the RMSNorm -> e4m3 kernel (rmsnorm_fp8.cu) on plain pointers; checks
// live in cuda::RmsNormFp8Forward. Thread-safety: stateless; ordered on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels {
// x: bf16 [m, h] row stride ldx, w: bf16 [h] (times weight_offset + w) -> q [mp, h],
// scale[g * mp + r].
cudaError_t LaunchRmsNormFp8(const void* x, int64_t ldx, const void* w, float weight_offset,
                             int64_t m, int64_t mp, int64_t h, float eps, uint8_t* q,
                             float* scale, cudaStream_t s);
}  // namespace tandem::kernels
