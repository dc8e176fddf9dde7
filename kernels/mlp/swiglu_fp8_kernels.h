// Launch function of the SwiGLU -> e4m3 kernel (swiglu_fp8.cu) on plain pointers; checks
// live in cuda::SwiGluFp8Forward. Thread-safety: stateless; ordered on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels {
// gate, up: bf16 [m, n] with row strides ldg, ldu -> q [mp, n], scale[g * mp + r].
cudaError_t LaunchSwiGluFp8(const void* gate, int64_t ldg, const void* up, int64_t ldu,
                            int64_t m, int64_t mp, int64_t n, uint8_t* q, float* scale,
                            cudaStream_t s);
}  // namespace tandem::kernels
