// Device helpers for block-scaled e4m3 producers (the activation quantizer and the fused
// RMSNorm / SwiGLU producers): one warp quantizes one 1x128 group, each lane holding four
// consecutive values. Same math as the CPU reference (kernels/gemm/fp8_cpu.cc): scale =
// amax / 448 (1 for an all-zero group), code = satfinite_rne(v / scale), IEEE division.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace tandem::kernels::fp8_detail {

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ uint8_t ToE4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Lane `lane` holds v[0..3], the group's elements 4*lane .. 4*lane+3 (zeros past `n`, the
// group's valid length). Writes the codes of the first n elements to dst[0..n) and returns
// the group's scale (in every lane). `packed_ok`: dst is 4-byte aligned.
__device__ __forceinline__ float QuantizeGroup128(const float v[4], uint8_t* dst, int n,
                                                  int lane, bool packed_ok) {
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
  amax = WarpMax(amax);
  const float scale = amax > 0.f ? amax / 448.f : 1.f;
  uint32_t packed = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) packed |= uint32_t{ToE4m3(v[j] / scale)} << (8 * j);
  const int base = lane * 4;
  if (packed_ok && base + 4 <= n) {
    *reinterpret_cast<uint32_t*>(dst + base) = packed;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (base + j < n) dst[base + j] = static_cast<uint8_t>(packed >> (8 * j));
  }
  return scale;
}

// Lane `lane`'s four values of the 128-column group at `p`: elements 4*lane .. 4*lane+3 as
// floats, zeros past `n` (the group's valid length). `vec_ok`: p is 8-byte aligned, so a
// full quad is one 8-byte load (the producers are memory-bound: 2-byte loads left them at
// ~0.4 of the copy rate).
__device__ __forceinline__ void LoadGroup4(const __nv_bfloat16* p, int n, int lane, bool vec_ok,
                                           float v[4]) {
  const int base = lane * 4;
  if (vec_ok && base + 4 <= n) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p + base);
    const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
    const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
    v[0] = __low2float(lo);
    v[1] = __high2float(lo);
    v[2] = __low2float(hi);
    v[3] = __high2float(hi);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = base + j < n ? __bfloat162float(p[base + j]) : 0.f;
}

// True when rows of `ld` elements starting at `p` keep every 4-element quad 8-byte aligned.
inline bool QuadAligned(const void* p, int64_t ld) {
  return reinterpret_cast<uintptr_t>(p) % 8 == 0 && ld % 4 == 0;
}

// The padding rows [m, mp) of an activation: zero codes, scale 1. One warp per (row, group).
__device__ __forceinline__ void ZeroGroup128(uint8_t* dst, int n, int lane) {
  for (int j = lane; j < n; j += 32) dst[j] = 0;
}

}  // namespace tandem::kernels::fp8_detail
