// Device-side building blocks shared by the memory-bound kernels (elementwise, RMSNorm,
// RoPE, SwiGLU, embedding, concat+noise): 16-byte vectors of bf16, bf16<->fp32 conversion,
// warp and block sums in fp32, and launch geometry.
// Include only from .cu files (which stay free of Status/fmt: nvcc cannot compile fmt's
// compile-time checks; launchers return cudaError_t). Thread-safety: n/a (device code).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/core/device_props.h"

namespace tandem::kernels::cuda_detail {

// Eight bf16 (16 bytes): one vector load/store.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 h[4];
};

template <typename T>
__device__ __forceinline__ float ToF32(T v);
template <>
__device__ __forceinline__ float ToF32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float ToF32<float>(float v) {
  return v;
}

template <typename T>
__device__ __forceinline__ T FromF32(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 FromF32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ float FromF32<float>(float v) {
  return v;
}

// Loads kVec elements starting at p (16-byte aligned when kVec * sizeof(T) == 16) as fp32.
// When kVec * sizeof(T) is a multiple of 16 the access is done in 16-byte pieces and p must
// be 16-byte aligned; otherwise element by element.
template <int kVec, typename T>
__device__ __forceinline__ void LoadVec(const T* p, float (&out)[kVec]) {
  constexpr int kBytes = kVec * sizeof(T);
  if constexpr (kBytes % 16 == 0) {
    constexpr int kPer = 16 / sizeof(T);
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      uint4 raw = __ldg(reinterpret_cast<const uint4*>(p) + c);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < kPer; ++i) out[c * kPer + i] = ToF32<T>(e[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = ToF32<T>(p[i]);
  }
}

template <int kVec, typename T>
__device__ __forceinline__ void StoreVec(T* p, const float (&in)[kVec]) {
  constexpr int kBytes = kVec * sizeof(T);
  if constexpr (kBytes % 16 == 0) {
    constexpr int kPer = 16 / sizeof(T);
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      uint4 raw;
      T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int i = 0; i < kPer; ++i) e[i] = FromF32<T>(in[c * kPer + i]);
      reinterpret_cast<uint4*>(p)[c] = raw;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) p[i] = FromF32<T>(in[i]);
  }
}

// kVec bf16 kept packed in registers (half the registers of fp32 copies), read as fp32.
template <int kVec>
struct alignas(kVec * 2 >= 16 ? 16 : kVec * 2) Bf16Pack {
  __nv_bfloat16 v[kVec];
  __device__ __forceinline__ float operator[](int i) const { return __bfloat162float(v[i]); }
};

// One load of kVec bf16 (16 bytes when kVec = 8; p aligned to the pack).
template <int kVec>
__device__ __forceinline__ Bf16Pack<kVec> LoadPack(const __nv_bfloat16* p) {
  return *reinterpret_cast<const Bf16Pack<kVec>*>(p);
}

// Sum over aligned groups of `width` lanes (width a power of two <= 32).
__device__ __forceinline__ float GroupSum(float v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, width);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, <= 1024); every thread gets it.
// `scratch` holds 32 floats of shared memory; the call begins and ends with a barrier so it
// can be reused in a loop.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  v = GroupSum(v, 32);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nwarps ? scratch[lane] : 0.f;
  return GroupSum(t, 32);
}

// True when every pointer is 16-byte aligned (vector loads allowed).
inline bool Aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Blocks for a grid-stride loop over `work` items with `threads` per block: enough to fill
// the device several times over, never more than needed.
inline unsigned GridFor(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  const int64_t max_blocks = int64_t{CurrentDeviceSmCount()} * 32;  // 32 resident is plenty
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// A bf16 matrix view with a leading dimension (row stride in elements), e.g. the gate and up
// halves of one [rows, 2I] tensor.
struct Rows {
  __nv_bfloat16* p;
  int64_t ld;
  __device__ __nv_bfloat16* at(int64_t r, int64_t c) const { return p + r * ld + c; }
};

}  // namespace tandem::kernels::cuda_detail
