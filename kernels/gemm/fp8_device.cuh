// Device helpers for block-scaled e4m3 producers (the activation quantizer and the fused
// RMSNorm / SwiGLU producers). Two shapes of group: one warp per 1x128 group with four
// consecutive values per lane (QuantizeGroup128), or one half-warp per group with eight
// values per lane (QuantizeHalfGroup8; QuantizeRowTile drives it over a block tile of rows x
// two groups, loads issued before any math, scales stored as coalesced runs). Same math as
// the CPU reference (kernels/gemm/fp8_cpu.cc): scale = amax / 448 (1 for an all-zero group),
// code = satfinite_rne(v / scale), IEEE division (ScaleAndQuotients computes the same
// quotients in three instructions each). Stateless; every helper with a shuffle must be
// reached by all 32 lanes of the warp.
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

// ---- Fast quotients and packed codes ----

// The group's scale and its quotients from the group's amax: scale = amax / 448 (1 when
// amax is 0 or NaN), q[j] = v[j] / scale, bitwise equal to those IEEE divisions at a third of
// the cost. Each division is Markstein's: with y = RN(1/b) and q0 = RN(a * y) (within one ulp
// of a / b), the residual b * q0 - a is exact and RN(q0 - residual * y) = RN(a / b). The
// theorem assumes no underflow, so this path is taken for amax in [2^-51, 2^66] (scale in
// [2^-60, 2^58]) or amax 0 (scale 1) only, where every quotient of magnitude >= 2^-11 keeps
// all intermediates normal; a smaller one may differ in its last bits but keeps v's sign
// (signed zeros included) and still converts to the same zero code (e4m3's smallest
// subnormal is 2^-9). Checked on the host against IEEE division: the scale for every float
// amax in the range, the codes for every bf16 v and every bf16 amax. The range test is taken
// once per group.
template <int N>
__device__ __forceinline__ float ScaleAndQuotients(const float* v, float amax, float* q) {
  // An all-zero group (amax 0: a padding row, or a half-warp past the row's last group) takes
  // this path too, with scale 1 (y = 1, q = v): sending it to the divisions below made a warp
  // whose other half held data run both paths (RMSNorm at H = 5120: 106 -> 158 us).
  if ((amax >= 0x1p-51f && amax <= 0x1p66f) || amax == 0.f) {
    constexpr float kInv448 = 1.f / 448.f;  // RN(1/448)
    const float s0 = __fmul_rn(amax, kInv448);
    const float scale =
        amax == 0.f ? 1.f : __fmaf_rn(-__fmaf_rn(448.f, s0, -amax), kInv448, s0);
    const float y = 1.f / scale;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float q0 = __fmul_rn(v[j], y);
      const float residual = __fmaf_rn(scale, q0, -v[j]);
      q[j] = __fmaf_rn(-residual, y, q0);
    }
    return scale;
  }
  const float scale = amax > 0.f ? amax / 448.f : 1.f;
#pragma unroll
  for (int j = 0; j < N; ++j) q[j] = v[j] / scale;
  return scale;
}

// Two quotients' codes, a's in the low byte (cvt.rn.satfinite.e4m3x2, as ToE4m3).
__device__ __forceinline__ uint32_t ToE4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// ---- Half-warp groups: eight values per lane ----

// Max over the 16 lanes of each half-warp (both halves at once).
__device__ __forceinline__ float HalfWarpMax(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One 128-column group per half-warp: lane j of the half holds v[0..7], the group's elements
// 8j .. 8j+7 (zeros past its end). `codes` gets the lane's eight codes (element 0 in the low
// byte of .x); returns the group's scale (every lane of the half).
__device__ __forceinline__ float QuantizeHalfGroup8(const float v[8], uint2& codes) {
  float amax = fabsf(v[0]);
#pragma unroll
  for (int j = 1; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
  float qv[8];
  const float scale = ScaleAndQuotients<8>(v, HalfWarpMax(amax), qv);
  codes = make_uint2(ToE4m3x2(qv[0], qv[1]) | ToE4m3x2(qv[2], qv[3]) << 16,
                     ToE4m3x2(qv[4], qv[5]) | ToE4m3x2(qv[6], qv[7]) << 16);
  return scale;
}

// Eight bf16 (one 16-byte load) as floats, element 0 from the low half of .x.
__device__ __forceinline__ void Bf16x8ToFloat(const uint4& raw, float v[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Two floats rounded to bf16 once (round to nearest even, as __float2bfloat16) and back.
__device__ __forceinline__ void RoundToBf16(float& a, float& b) {
  const __nv_bfloat162 r = __floats2bfloat162_rn(a, b);
  a = __low2float(r);
  b = __high2float(r);
}

// ---- Row tiles for the bf16 producers ----

// One 256-thread block quantizes rows [r0, r0 + 8 * kItems) x two 128-column groups of an
// [mp, n] output (blockIdx.x enumerates tiles, group pairs fastest). Half-warp h (of 16) takes
// group h % 2 of rows h / 2 + 8 i (i < kItems): a warp reads 512 contiguous bytes per input
// and load. Every load of a thread is issued before any math (kItems x 16 bytes per input in
// flight), which is what keeps these memory-bound producers near the copy rate; the block's
// 2 x 8 kItems scales go through shared memory so each group's run of rows is one coalesced
// store of the g-major layout scale[g * mp + r]. Rows [m, mp) read nothing: zero values, so
// zero codes and scale 1. Needs n % 8 == 0 and 16-byte aligned rows (Producer's inputs).
// Producer: `Raw` (one lane's raw inputs, value-initialized to zeros), `Load(r, c, Raw&)`
// (columns c .. c+7 of row r), `Values(const Raw&, float v[8])` (zeros give zeros).
template <int kItems, class Producer>
__device__ __forceinline__ void QuantizeRowTile(const Producer& p, int64_t m, int64_t mp,
                                                int64_t n, uint8_t* q, float* scale) {
  constexpr int kRows = 8 * kItems;
  __shared__ float tile_scale[2][kRows];
  const unsigned gtiles = static_cast<unsigned>((n + 255) / 256);
  const int64_t r0 = int64_t{blockIdx.x / gtiles} * kRows;
  const int64_t g0 = int64_t{blockIdx.x % gtiles} * 2;
  const int half = static_cast<int>(threadIdx.x / 16), gi = half % 2, row = half / 2;
  const int64_t c = (g0 + gi) * 128 + (threadIdx.x % 16) * 8;
  const bool col_ok = c < n;
  typename Producer::Raw raw[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    raw[i] = {};
    const int64_t r = r0 + row + 8 * i;
    if (col_ok && r < m) p.Load(r, c, raw[i]);
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t r = r0 + row + 8 * i;
    float v[8];
    p.Values(raw[i], v);
    uint2 codes;
    const float sc = QuantizeHalfGroup8(v, codes);
    if (col_ok && r < mp) *reinterpret_cast<uint2*>(q + r * n + c) = codes;
    if (threadIdx.x % 16 == 0) tile_scale[gi][row + 8 * i] = sc;
  }
  __syncthreads();
  for (int t = static_cast<int>(threadIdx.x); t < 2 * kRows; t += static_cast<int>(blockDim.x)) {
    const int64_t g = g0 + t / kRows, r = r0 + t % kRows;
    if (g * 128 < n && r < mp) scale[g * mp + r] = tile_scale[t / kRows][t % kRows];
  }
}

// Blocks of QuantizeRowTile<kItems> that cover an [mp, n] output.
inline unsigned RowTileBlocks(int64_t mp, int64_t n, int items) {
  const int64_t rows = 8 * int64_t{items};
  return static_cast<unsigned>(((mp + rows - 1) / rows) * ((n + 255) / 256));
}

// True when rows of `ld` bf16 elements starting at `p` keep every 8-element chunk 16-byte
// aligned (QuantizeRowTile's loads).
inline bool OctAligned(const void* p, int64_t ld) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 8 == 0;
}

}  // namespace tandem::kernels::fp8_detail
