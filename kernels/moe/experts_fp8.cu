// CUDA kernels of the row-wise FP8 expert path (kernels/moe/experts_fp8.h), one block per
// buffer row (one thread per eight columns, 32 to 256 threads), eight columns per thread and
// step (16-byte loads):
//   quantize rows:  the row (gathered through `gather` when given) -> amax -> codes, scale;
//   swiglu+quant:   raw gate|up * s_x[r] * s_w[e, c] -> silu(g) u (kept in shared memory)
//                   -> amax -> codes, scale;
//   scale rows:     y[r, c] *= s_a[r] s_w[e, c] in place.
// The math is the CPU twin's (experts_fp8_cpu.cc) in the same order: scale = amax / 448
// (1 for amax 0), code = satfinite RNE e4m3 of __fdiv_rn(v, scale). A row's expert: r / cap
// on the padded layout (padding rows past its count: zero codes, scale 1, or untouched),
// else the largest e with offsets[e] <= r (binary search; empty experts share a start).
// Thread-safety: the launchers are asynchronous on their stream.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/moe/moe_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kMaxThreads = 256;

// Threads per row: one per eight columns, a multiple of 32 in [32, 256] (at I = 512 a
// 256-thread block would leave three quarters of its threads idle).
unsigned ThreadsFor(int64_t cols) {
  const int64_t t = (cols / 8 + 31) / 32 * 32;
  return static_cast<unsigned>(t < 32 ? 32 : t > kMaxThreads ? kMaxThreads : t);
}

struct Owner {
  int64_t expert;
  bool data;
};

__device__ __forceinline__ Owner OwnerOf(const int32_t* offsets, int64_t e_count, int64_t cap,
                                         int64_t r) {
  if (cap > 0) {
    const int64_t e = r / cap;
    return {e, r % cap < offsets[e + 1] - offsets[e]};
  }
  int64_t lo = 0, hi = e_count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return {lo, true};
}

// Max over the block (every thread gets it); blockDim.x a multiple of 32, <= kMaxThreads.
__device__ __forceinline__ float BlockMax(float v) {
  __shared__ float warp_max[kMaxThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  float m = warp_max[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, warp_max[w]);
  __syncthreads();  // warp_max is reused by the next call
  return m;
}

__device__ __forceinline__ float RowScale(float amax) {
  return amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f;
}

__device__ __forceinline__ uint8_t Code(float v, float scale) {
  return static_cast<uint8_t>(
      __nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3));
}

// Eight bf16 (one 16-byte load) as floats, and eight codes packed for one 8-byte store.
__device__ __forceinline__ void Load8(const __nv_bfloat16* p, float v[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = __uint_as_float(w[j] << 16);
    v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ void Store8(uint8_t* dst, const float v[8], float scale) {
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    lo |= uint32_t{Code(v[j], scale)} << (8 * j);
    hi |= uint32_t{Code(v[4 + j], scale)} << (8 * j);
  }
  *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
}

__device__ __forceinline__ void ZeroRow(uint8_t* dst, int64_t k, float* scale) {
  for (int64_t c = threadIdx.x * 8; c < k; c += blockDim.x * 8)
    *reinterpret_cast<uint2*>(dst + c) = make_uint2(0, 0);
  if (threadIdx.x == 0) *scale = 1.f;
}

// Columns are taken eight at a time (the launchers need k, i, h multiples of 8 and 16-byte
// aligned rows): thread t takes columns 8t .. 8t+7, then 8(t + blockDim.x) ...
__global__ void moe_fp8_quantize_rows_kernel(const __nv_bfloat16* x, int64_t ldx,
                                             const int32_t* gather, const int32_t* offsets,
                                             int64_t e_count, int64_t cap, int64_t k,
                                             uint8_t* codes, float* scale) {
  const int64_t r = blockIdx.x;
  uint8_t* dst = codes + r * k;
  if (cap > 0 && !OwnerOf(offsets, e_count, cap, r).data) return ZeroRow(dst, k, scale + r);
  const __nv_bfloat16* src = x + (gather != nullptr ? gather[r] : r) * ldx;
  float amax = 0.f, v[8];
  for (int64_t c = threadIdx.x * 8; c < k; c += blockDim.x * 8) {
    Load8(src + c, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
  }
  const float s = RowScale(BlockMax(amax));
  for (int64_t c = threadIdx.x * 8; c < k; c += blockDim.x * 8) {
    Load8(src + c, v);  // a second read of the row, from L1/L2
    Store8(dst + c, v, s);
  }
  if (threadIdx.x == 0) scale[r] = s;
}

// Dynamic shared memory: i floats (the row's act).
__global__ void moe_fp8_swiglu_quantize_kernel(const __nv_bfloat16* raw, int64_t ld,
                                               const float* x_scale, const float* w_scale,
                                               const int32_t* offsets, int64_t e_count,
                                               int64_t cap, int64_t i, uint8_t* codes,
                                               float* act_scale) {
  extern __shared__ float act[];
  const int64_t r = blockIdx.x;
  uint8_t* dst = codes + r * i;
  const Owner own = OwnerOf(offsets, e_count, cap, r);
  if (!own.data) return ZeroRow(dst, i, act_scale + r);
  const __nv_bfloat16* in = raw + r * ld;
  const float* sw = w_scale + own.expert * 2 * i;
  const float sx = x_scale[r];
  float amax = 0.f;
  for (int64_t c = threadIdx.x * 8; c < i; c += blockDim.x * 8) {
    float g[8], u[8];
    Load8(in + c, g);
    Load8(in + i + c, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float gs = __fmul_rn(__fmul_rn(g[j], sx), sw[c + j]);
      const float us = __fmul_rn(__fmul_rn(u[j], sx), sw[i + c + j]);
      const float a = __fmul_rn(__fdiv_rn(gs, __fadd_rn(1.f, expf(-gs))), us);
      act[c + j] = a;
      amax = fmaxf(amax, fabsf(a));
    }
  }
  const float s = RowScale(BlockMax(amax));  // its __syncthreads also publishes act
  for (int64_t c = threadIdx.x * 8; c < i; c += blockDim.x * 8) Store8(dst + c, act + c, s);
  if (threadIdx.x == 0) act_scale[r] = s;
}

__global__ void moe_fp8_scale_rows_kernel(__nv_bfloat16* y, int64_t ld, const float* act_scale,
                                          const float* w_scale, const int32_t* offsets,
                                          int64_t e_count, int64_t cap, int64_t h) {
  const int64_t r = blockIdx.x;
  const Owner own = OwnerOf(offsets, e_count, cap, r);
  if (!own.data) return;
  __nv_bfloat16* out = y + r * ld;
  const float* sw = w_scale + own.expert * h;
  const float sa = act_scale[r];
  for (int64_t c = threadIdx.x * 8; c < h; c += blockDim.x * 8) {
    float v[8];
    Load8(out + c, v);
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(
          __fmul_rn(__fmul_rn(v[2 * j], sa), sw[c + 2 * j]),
          __fmul_rn(__fmul_rn(v[2 * j + 1], sa), sw[c + 2 * j + 1]));
      w[j] = *reinterpret_cast<const uint32_t*>(&p);
    }
    *reinterpret_cast<uint4*>(out + c) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace

cudaError_t LaunchMoeFp8QuantizeRows(const void* x, int64_t ldx, const int32_t* gather,
                                     const int32_t* offsets, int64_t e, int64_t cap,
                                     int64_t rows, int64_t k, uint8_t* codes, float* scale,
                                     Stream s) {
  if (rows == 0) return cudaSuccess;
  moe_fp8_quantize_rows_kernel<<<static_cast<unsigned>(rows), ThreadsFor(k), 0, s>>>(
      static_cast<const __nv_bfloat16*>(x), ldx, gather, offsets, e, cap, k, codes, scale);
  return cudaGetLastError();
}

cudaError_t LaunchMoeFp8SwiGluQuantize(const void* raw, int64_t ld, const float* x_scale,
                                       const float* w_scale, const int32_t* offsets, int64_t e,
                                       int64_t cap, int64_t rows, int64_t i, uint8_t* codes,
                                       float* act_scale, Stream s) {
  if (rows == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(i) * sizeof(float);
  if (smem > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        moe_fp8_swiglu_quantize_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  moe_fp8_swiglu_quantize_kernel<<<static_cast<unsigned>(rows), ThreadsFor(i), smem, s>>>(
      static_cast<const __nv_bfloat16*>(raw), ld, x_scale, w_scale, offsets, e, cap, i, codes,
      act_scale);
  return cudaGetLastError();
}

cudaError_t LaunchMoeFp8ScaleRows(void* y, int64_t ld, const float* act_scale,
                                  const float* w_scale, const int32_t* offsets, int64_t e,
                                  int64_t cap, int64_t rows, int64_t h, Stream s) {
  if (rows == 0) return cudaSuccess;
  moe_fp8_scale_rows_kernel<<<static_cast<unsigned>(rows), ThreadsFor(h), 0, s>>>(
      static_cast<__nv_bfloat16*>(y), ld, act_scale, w_scale, offsets, e, cap, h);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
