// CUDA kernels of the row-wise FP8 expert path (kernels/moe/experts_fp8.h). One warp per
// buffer row, eight rows per 256-thread block (the rows are short: 512 to 2048 columns, and a
// block per row left the kernels waiting on latency); a lane takes eight columns per step
// (16-byte loads):
//   quantize rows:  the row (gathered through `gather` when given) -> amax -> codes, scale;
//   gather rows:    codes and scale of a quantized row, copied to the rows that take it;
//   swiglu+quant:   raw gate|up * s_x[r] * s_w[e, c] -> silu(g) u -> amax -> codes, scale;
//   scale rows:     y[r, c] *= s_a[r] s_w[e, c] in place.
// Rows of up to 256 V columns stay in registers between the amax and the codes (V = 1, 2, 4
// or 8 vectors per lane, picked by the launcher); longer rows are read (or, for the SwiGLU,
// computed) twice, the second time from L1/L2.
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

constexpr int kWarps = 8;                   // rows per block
constexpr int kThreads = kWarps * 32;
constexpr int64_t kStep = 32 * 8;           // columns a warp takes per step (8 per lane)

unsigned BlocksFor(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

// Vectors per lane kept in registers: the smallest of 1, 2, 4, 8 covering `cols` (8 beyond).
int VectorsFor(int64_t cols) {
  int v = 1;
  while (v < 8 && v * kStep < cols) v *= 2;
  return v;
}

struct Row {
  int64_t r;  // the warp's row
  int lane;
};
__device__ __forceinline__ Row WarpRow() {
  return {static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32,
          static_cast<int>(threadIdx.x % 32)};
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

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float RowScale(float amax) {
  return amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f;
}

__device__ __forceinline__ uint8_t Code(float v, float scale) {
  return static_cast<uint8_t>(
      __nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3));
}

// Eight bf16 (one 16-byte word) as floats, and eight codes packed for one 8-byte store.
__device__ __forceinline__ void Unpack8(uint4 raw, float v[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = __uint_as_float(w[j] << 16);
    v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ void Load8(const __nv_bfloat16* p, float v[8]) {
  Unpack8(*reinterpret_cast<const uint4*>(p), v);
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
__device__ __forceinline__ float Amax8(const float v[8], float amax) {
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
  return amax;
}

// A padding row: zero codes, scale 1 (k a multiple of 8).
__device__ __forceinline__ void ZeroRow(uint8_t* dst, int64_t k, float* scale, int lane) {
  for (int64_t c = lane * 8; c < k; c += kStep) *reinterpret_cast<uint2*>(dst + c) = make_uint2(0, 0);
  if (lane == 0) *scale = 1.f;
}

// Columns are taken eight at a time (the launchers need k, i, h multiples of 8 and 16-byte
// aligned rows): lane l takes columns 8l .. 8l+7, then 8(l + 32) ...
template <int V>
__global__ void moe_fp8_quantize_rows_kernel(const __nv_bfloat16* x, int64_t ldx,
                                             const int32_t* gather, const int32_t* offsets,
                                             int64_t e_count, int64_t cap, int64_t rows,
                                             int64_t k, uint8_t* codes, float* scale) {
  const Row w = WarpRow();
  if (w.r >= rows) return;
  uint8_t* dst = codes + w.r * k;
  if (cap > 0 && !OwnerOf(offsets, e_count, cap, w.r).data)
    return ZeroRow(dst, k, scale + w.r, w.lane);
  const __nv_bfloat16* src = x + (gather != nullptr ? gather[w.r] : w.r) * ldx;
  float amax = 0.f, v[8], s;
  if (k <= V * kStep) {  // the row in registers: one read
    uint4 raw[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t c = j * kStep + w.lane * 8;
      if (c < k) raw[j] = *reinterpret_cast<const uint4*>(src + c);
    }
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (j * kStep + w.lane * 8 < k) {
        Unpack8(raw[j], v);
        amax = Amax8(v, amax);
      }
    s = RowScale(WarpMax(amax));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t c = j * kStep + w.lane * 8;
      if (c < k) {
        Unpack8(raw[j], v);
        Store8(dst + c, v, s);
      }
    }
  } else {  // two reads, the second from L1/L2
    for (int64_t c = w.lane * 8; c < k; c += kStep) {
      Load8(src + c, v);
      amax = Amax8(v, amax);
    }
    s = RowScale(WarpMax(amax));
    for (int64_t c = w.lane * 8; c < k; c += kStep) {
      Load8(src + c, v);
      Store8(dst + c, v, s);
    }
  }
  if (w.lane == 0) scale[w.r] = s;
}

// Codes and scale of row gather[r] of (src, src_scale), 16 bytes per lane and step (k a
// multiple of 16); padding rows of the padded layout: zero codes, scale 1.
__global__ void moe_fp8_gather_rows_kernel(const uint8_t* __restrict__ src,
                                           const float* __restrict__ src_scale,
                                           const int32_t* gather, const int32_t* offsets,
                                           int64_t e_count, int64_t cap, int64_t rows,
                                           int64_t k, uint8_t* __restrict__ codes,
                                           float* __restrict__ scale) {
  const Row w = WarpRow();
  if (w.r >= rows) return;
  uint8_t* dst = codes + w.r * k;
  if (cap > 0 && !OwnerOf(offsets, e_count, cap, w.r).data)
    return ZeroRow(dst, k, scale + w.r, w.lane);
  const int64_t from = gather[w.r];
  const uint8_t* row = src + from * k;
  constexpr int kUnroll = 4;  // four loads in flight before the stores
  for (int64_t base = 0; base < k; base += kUnroll * 512) {
    uint4 v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t c = base + j * 512 + w.lane * 16;
      if (c < k) v[j] = *reinterpret_cast<const uint4*>(row + c);
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t c = base + j * 512 + w.lane * 16;
      if (c < k) *reinterpret_cast<uint4*>(dst + c) = v[j];
    }
  }
  if (w.lane == 0) scale[w.r] = src_scale[from];
}

// act[c .. c+8) of one row: silu(g s_x s_gu) (u s_x s_gu), in the CPU twin's order.
__device__ __forceinline__ void SwiGlu8(const __nv_bfloat16* in, const float* sw, float sx,
                                        int64_t i, int64_t c, float a[8]) {
  float g[8], u[8], sg[8], su[8];
  Load8(in + c, g);
  Load8(in + i + c, u);
  *reinterpret_cast<float4*>(sg) = *reinterpret_cast<const float4*>(sw + c);
  *reinterpret_cast<float4*>(sg + 4) = *reinterpret_cast<const float4*>(sw + c + 4);
  *reinterpret_cast<float4*>(su) = *reinterpret_cast<const float4*>(sw + i + c);
  *reinterpret_cast<float4*>(su + 4) = *reinterpret_cast<const float4*>(sw + i + c + 4);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float gs = __fmul_rn(__fmul_rn(g[j], sx), sg[j]);
    const float us = __fmul_rn(__fmul_rn(u[j], sx), su[j]);
    a[j] = __fmul_rn(__fdiv_rn(gs, __fadd_rn(1.f, expf(-gs))), us);
  }
}

template <int V>
__global__ void moe_fp8_swiglu_quantize_kernel(const __nv_bfloat16* raw, int64_t ld,
                                               const float* x_scale, const float* w_scale,
                                               const int32_t* offsets, int64_t e_count,
                                               int64_t cap, int64_t rows, int64_t i,
                                               uint8_t* codes, float* act_scale) {
  const Row w = WarpRow();
  if (w.r >= rows) return;
  uint8_t* dst = codes + w.r * i;
  const Owner own = OwnerOf(offsets, e_count, cap, w.r);
  if (!own.data) return ZeroRow(dst, i, act_scale + w.r, w.lane);
  const __nv_bfloat16* in = raw + w.r * ld;
  const float* sw = w_scale + own.expert * 2 * i;
  const float sx = x_scale[w.r];
  float amax = 0.f, s;
  if (i <= V * kStep) {  // act in registers
    float a[V][8];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t c = j * kStep + w.lane * 8;
      if (c < i) {
        SwiGlu8(in, sw, sx, i, c, a[j]);
        amax = Amax8(a[j], amax);
      }
    }
    s = RowScale(WarpMax(amax));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t c = j * kStep + w.lane * 8;
      if (c < i) Store8(dst + c, a[j], s);
    }
  } else {  // computed twice, the second time from L1/L2
    float a[8];
    for (int64_t c = w.lane * 8; c < i; c += kStep) {
      SwiGlu8(in, sw, sx, i, c, a);
      amax = Amax8(a, amax);
    }
    s = RowScale(WarpMax(amax));
    for (int64_t c = w.lane * 8; c < i; c += kStep) {
      SwiGlu8(in, sw, sx, i, c, a);
      Store8(dst + c, a, s);
    }
  }
  if (w.lane == 0) act_scale[w.r] = s;
}

__global__ void moe_fp8_scale_rows_kernel(__nv_bfloat16* y, int64_t ld, const float* act_scale,
                                          const float* w_scale, const int32_t* offsets,
                                          int64_t e_count, int64_t cap, int64_t rows,
                                          int64_t h) {
  const Row w = WarpRow();
  if (w.r >= rows) return;
  const Owner own = OwnerOf(offsets, e_count, cap, w.r);
  if (!own.data) return;
  __nv_bfloat16* out = y + w.r * ld;
  const float* sw = w_scale + own.expert * h;
  const float sa = act_scale[w.r];
  for (int64_t c = w.lane * 8; c < h; c += kStep) {
    float v[8];
    Load8(out + c, v);
    uint32_t packed[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(
          __fmul_rn(__fmul_rn(v[2 * j], sa), sw[c + 2 * j]),
          __fmul_rn(__fmul_rn(v[2 * j + 1], sa), sw[c + 2 * j + 1]));
      packed[j] = *reinterpret_cast<const uint32_t*>(&p);
    }
    *reinterpret_cast<uint4*>(out + c) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// Launches kernel<V> for V = VectorsFor(cols).
template <class Launch>
cudaError_t ByVectors(int64_t cols, Launch launch) {
  switch (VectorsFor(cols)) {
    case 1: launch.template operator()<1>(); break;
    case 2: launch.template operator()<2>(); break;
    case 4: launch.template operator()<4>(); break;
    default: launch.template operator()<8>(); break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMoeFp8QuantizeRows(const void* x, int64_t ldx, const int32_t* gather,
                                     const int32_t* offsets, int64_t e, int64_t cap,
                                     int64_t rows, int64_t k, uint8_t* codes, float* scale,
                                     Stream s) {
  if (rows == 0) return cudaSuccess;
  return ByVectors(k, [&]<int V>() {
    moe_fp8_quantize_rows_kernel<V><<<BlocksFor(rows), kThreads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(x), ldx, gather, offsets, e, cap, rows, k, codes,
        scale);
  });
}

cudaError_t LaunchMoeFp8GatherRows(const uint8_t* src, const float* src_scale,
                                   const int32_t* gather, const int32_t* offsets, int64_t e,
                                   int64_t cap, int64_t rows, int64_t k, uint8_t* codes,
                                   float* scale, Stream s) {
  if (rows == 0) return cudaSuccess;
  moe_fp8_gather_rows_kernel<<<BlocksFor(rows), kThreads, 0, s>>>(
      src, src_scale, gather, offsets, e, cap, rows, k, codes, scale);
  return cudaGetLastError();
}

cudaError_t LaunchMoeFp8SwiGluQuantize(const void* raw, int64_t ld, const float* x_scale,
                                       const float* w_scale, const int32_t* offsets, int64_t e,
                                       int64_t cap, int64_t rows, int64_t i, uint8_t* codes,
                                       float* act_scale, Stream s) {
  if (rows == 0) return cudaSuccess;
  return ByVectors(i, [&]<int V>() {
    moe_fp8_swiglu_quantize_kernel<V><<<BlocksFor(rows), kThreads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(raw), ld, x_scale, w_scale, offsets, e, cap, rows, i,
        codes, act_scale);
  });
}

cudaError_t LaunchMoeFp8ScaleRows(void* y, int64_t ld, const float* act_scale,
                                  const float* w_scale, const int32_t* offsets, int64_t e,
                                  int64_t cap, int64_t rows, int64_t h, Stream s) {
  if (rows == 0) return cudaSuccess;
  moe_fp8_scale_rows_kernel<<<BlocksFor(rows), kThreads, 0, s>>>(
      static_cast<__nv_bfloat16*>(y), ld, act_scale, w_scale, offsets, e, cap, rows, h);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
