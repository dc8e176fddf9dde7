// Launch functions of the block-scaled FP8 CUDA kernels (kernels/gemm/fp8.cu), on plain
// pointers; argument checks live in the Status-returning launchers (fp8_cuda.cc).
// Layouts as in kernels/gemm/fp8.h. Thread-safety: stateless; ordered on `s`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels {

// w: [n, k] row stride ldw, bf16 (w_is_f32 false) or f32 -> q [n, k] dense, scale [nb, lds].
cudaError_t LaunchQuantizeFp8Weight(const void* w, bool w_is_f32, int64_t ldw, int64_t n,
                                    int64_t k, uint8_t* q, float* scale, int64_t lds,
                                    cudaStream_t s);
// x: [m, k] row stride ldx, bf16 or f32 -> q [mp, k] dense, scale[kb * mp + r] (rows >= m zero).
cudaError_t LaunchQuantizeFp8Activation(const void* x, bool x_is_f32, int64_t ldx, int64_t m,
                                        int64_t mp, int64_t k, uint8_t* q, float* scale,
                                        cudaStream_t s);
// q [n, k] -> qt [k, n]; scale [ceil(n/128), lds] -> scale_t [ceil(k/128), lds_t] (padding 0).
cudaError_t LaunchTransposeFp8Weight(const uint8_t* q, const float* scale, int64_t lds,
                                     int64_t n, int64_t k, uint8_t* qt, float* scale_t,
                                     int64_t lds_t, cudaStream_t s);
// q [n, k], scale [nb, lds] -> out [n, k] dense, bf16 or f32.
cudaError_t LaunchDequantizeFp8Weight(const uint8_t* q, const float* scale, int64_t lds,
                                      int64_t n, int64_t k, void* out, bool out_is_f32,
                                      cudaStream_t s);

}  // namespace tandem::kernels
