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

__device__ __forceinline__ const bf16_t* At(const ConvRows& m, int64_t r, int64_t c) {
  return static_cast<const bf16_t*>(m.p) + r * m.ld + c;
}
__device__ __forceinline__ bf16_t* MutAt(const ConvRows& m, int64_t r, int64_t c) {
  return static_cast<bf16_t*>(m.p) + r * m.ld + c;
}

// kVec bf16 kept packed in registers (half the registers of fp32 copies; the windows of rows
// are what bounds the kernels' register count, and so their occupancy), read as fp32.
template <int kVec>
struct Packed;
template <>
struct Packed<8> {
  __nv_bfloat162 h[4];
  // The 8 channels at p (16-byte aligned), or zeros when !valid.
  __device__ __forceinline__ void Load(const bf16_t* p, bool valid) {
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (valid) raw = __ldg(reinterpret_cast<const uint4*>(p));
    *reinterpret_cast<uint4*>(h) = raw;
  }
  __device__ __forceinline__ float operator[](int i) const {
    return i % 2 == 0 ? __low2float(h[i / 2]) : __high2float(h[i / 2]);
  }
};
template <>
struct Packed<1> {
  bf16_t v;
  __device__ __forceinline__ void Load(const bf16_t* p, bool valid) {
    v = valid ? *p : __float2bfloat16_rn(0.f);
  }
  __device__ __forceinline__ float operator[](int) const { return __bfloat162float(v); }
};

// Shifts a window of K entries one step back: w[k] = w[k - 1] for k = K-1 .. 1 (w[0] is
// then refilled).
template <int kTaps, typename V>
__device__ __forceinline__ void ShiftBack(V (&w)[kTaps]) {
#pragma unroll
  for (int k = kTaps - 1; k > 0; --k) w[k] = w[k - 1];
}

// Shifts a window of K entries one step forward: w[k] = w[k + 1] (w[K-1] is then refilled).
template <int kTaps, typename V>
__device__ __forceinline__ void ShiftForward(V (&w)[kTaps]) {
#pragma unroll
  for (int k = 0; k + 1 < kTaps; ++k) w[k] = w[k + 1];
}

}  // namespace tandem::kernels::dflash2::conv_detail
