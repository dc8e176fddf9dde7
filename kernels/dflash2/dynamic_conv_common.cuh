// Device pieces shared by the dynamic convolution's forward (dynamic_conv.cu) and backward
// (dynamic_conv_bwd.cu): the tile geometry and masked vector loads. Include only from .cu
// files. Thread-safety: n/a (device code).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dflash2/dynamic_conv_kernels.h"
#include "kernels/elementwise/elementwise_vec.cuh"

namespace tandem::kernels::dflash2::conv_detail {

using bf16_t = __nv_bfloat16;

// A block is kThreadsX x kThreadsY threads; thread (tx, ty) owns kVec channels
// (c0 = (blockIdx.x * kThreadsX + tx) * kVec) of kRowsPerThread consecutive rows, so a block
// covers kThreadsX * kVec channels of kDynamicConvRowsPerBlock rows. A thread walks its rows
// in order with the K rows of its taps in registers: x[t - k] for the forward and the dbase /
// dd terms, dy[t + k] for dx; only K - 1 rows beyond its own are read twice.
constexpr int kThreadsX = 64;
constexpr int kThreadsY = 4;
constexpr int kRowsPerThread = static_cast<int>(kDynamicConvRowsPerBlock) / kThreadsY;
static_assert(kRowsPerThread * kThreadsY == kDynamicConvRowsPerBlock);
// Row tiles a grid covers per pass (gridDim.y's limit); larger inputs loop.
constexpr int64_t kMaxGridY = 65535;

// out = the kVec channels at p, or zeros when !valid.
template <int kVec>
__device__ __forceinline__ void LoadOrZero(const bf16_t* p, bool valid, float (&out)[kVec]) {
  if (valid) {
    cuda_detail::LoadVec<kVec>(p, out);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = 0.f;
  }
}

__device__ __forceinline__ const bf16_t* At(const ConvRows& m, int64_t r, int64_t c) {
  return static_cast<const bf16_t*>(m.p) + r * m.ld + c;
}
__device__ __forceinline__ bf16_t* MutAt(const ConvRows& m, int64_t r, int64_t c) {
  return static_cast<bf16_t*>(m.p) + r * m.ld + c;
}

// Shifts a window of K vectors one step: w[k] = w[k - 1] for k = K-1 .. 1 (w[0] is reloaded).
template <int kTaps, int kVec>
__device__ __forceinline__ void ShiftBack(float (&w)[kTaps][kVec]) {
#pragma unroll
  for (int k = kTaps - 1; k > 0; --k)
#pragma unroll
    for (int i = 0; i < kVec; ++i) w[k][i] = w[k - 1][i];
}

// Shifts a window of K vectors one step forward: w[k] = w[k + 1] (w[K-1] is reloaded).
template <int kTaps, int kVec>
__device__ __forceinline__ void ShiftForward(float (&w)[kTaps][kVec]) {
#pragma unroll
  for (int k = 0; k + 1 < kTaps; ++k)
#pragma unroll
    for (int i = 0; i < kVec; ++i) w[k][i] = w[k + 1][i];
}

}  // namespace tandem::kernels::dflash2::conv_detail
