// CUDA RMSNorm -> e4m3: bf16(x * rstd * (weight_offset + w)), one rounding, quantized per
// 128-column group (fp8_device.cuh). Padding rows get zero codes and scale 1.
// Fast path (16-byte aligned rows, H % 8 == 0, H <= 8192): 256-thread blocks of two rows.
// Every lane loads all its 16-byte chunks of both rows before any math and keeps them in
// registers (kS chunks per row, a template parameter), so a block has two whole rows in
// flight and the second pass reads only w (L1-resident); then a half-warp per 128-column
// group (eight values per lane) quantizes. Warp w owns groups w, w + 8, ... (its lower half
// the even ones, its upper half the odd ones).
// Fallback (other shapes): one row per block, warp w takes groups w, w + 8, ... with four
// values per lane (lane l: elements 4l .. 4l+3), looping over the groups twice (the second
// pass re-reads x from L1).
// Both paths add the squares in the same fp32 order (the fallback's: per lane over its
// groups, the warp's butterfly, the eight warps in order; see WarpSquares), so rstd and the
// codes are the same bits on both.
#include <cuda_bf16.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/norm/rmsnorm_fp8_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kMaxRegSlots = 4, kRegRows = 2;

__device__ __forceinline__ void ZeroPaddingRow(int64_t r, int64_t mp, int64_t h, uint8_t* q,
                                               float* scale) {
  for (int64_t i = threadIdx.x; i < h; i += kThreads) q[r * h + i] = 0;
  for (int64_t g = threadIdx.x; g < (h + 127) / 128; g += kThreads) scale[g * mp + r] = 1.f;
}

// The squares of one old-layout quad (elements 4l .. 4l+3 of a group), as both paths add it.
__device__ __forceinline__ float QuadSquares(const float* v) {
  return v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
}

// The row's sum from each warp's total (lane 0 of warp w: partial[w]), added in warp order.
__device__ __forceinline__ float SumOfWarps(const float (&partial)[kWarps]) {
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) ss += partial[i];
  return ss;
}

// x * rstd * (weight_offset + w) in fp32, before the one rounding to bf16.
__device__ __forceinline__ float NormValue(float x, float rstd, float weight_offset, float w) {
  return x * rstd * (weight_offset + w);
}

// Warp w's total of the fallback's per-lane partials, from the fast path's layout: lane
// (half hf, p) holds, in slot s, columns 8p .. 8p+7 of group w + 8 (2s + hf), i.e. the
// fallback's quads l = 2p (j = 0) and 2p + 1 (j = 1) of its k-th group, k = 2s + hf. The
// fallback's lane l summed its quads over k = 0, 1, 2, ... in order, then the warp's
// butterfly xor 16, 8, 4, 2, 1; here the lower half adds k even (its own) and k odd (from
// lane + 16) in the same order, and the butterfly is lane xor 8, 4, 2, 1 then j. Same
// fp32 operations in the same order: the same bits. Valid on lanes 0..15.
template <int kS>
__device__ __forceinline__ float WarpSquares(const uint4 (&xs)[kS]) {
  float acc[2] = {0.f, 0.f};
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    float v[8];
    fp8_detail::Bf16x8ToFloat(xs[s], v);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float sq = QuadSquares(v + 4 * j);
      const float odd = __shfl_down_sync(0xffffffffu, sq, 16);
      acc[j] += sq;
      acc[j] += odd;
    }
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < 2; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
  return acc[0] + acc[1];
}

// Fast path: kRows rows per block (from r0), kS = slots per half-warp (groups per warp,
// halved, rounded up). Rows >= m (padding) load nothing and produce zero codes and scale 1.
template <int kS, int kRows>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_fp8_regs_kernel(const __nv_bfloat16* x, int64_t ldx, const __nv_bfloat16* w,
                            float weight_offset, int64_t m, int64_t mp, int64_t h, float eps,
                            uint8_t* q, float* scale) {
  __shared__ float partial[kRows][kWarps];
  const int64_t r0 = int64_t{blockIdx.x} * kRows;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Slot s: group warp + 8 hf + 16 s, columns c0 + 2048 s .. + 7.
  const int64_t c0 = (warp + 8 * (lane / 16)) * 128 + (lane % 16) * 8;
  uint4 xs[kRows][kS];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr)
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      const int64_t c = c0 + 2048 * s;
      xs[rr][s] = r0 + rr < m && c < h
                      ? __ldg(reinterpret_cast<const uint4*>(x + (r0 + rr) * ldx + c))
                      : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const float ss = WarpSquares<kS>(xs[rr]);
    if (lane == 0) partial[rr][warp] = ss;
  }
  __syncthreads();
  float rstd[kRows];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) rstd[rr] = rsqrtf(SumOfWarps(partial[rr]) / h + eps);
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    const int64_t c = c0 + 2048 * s;
    if ((warp + 16 * s) * 128 >= h) break;  // warp-uniform: the lower half's group
    float wv[8];
    fp8_detail::Bf16x8ToFloat(
        c < h ? __ldg(reinterpret_cast<const uint4*>(w + c)) : make_uint4(0, 0, 0, 0), wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) wv[j] = weight_offset + wv[j];
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      const int64_t r = r0 + rr;
      const bool ok = r < m && c < h;
      float v[8];
      fp8_detail::Bf16x8ToFloat(xs[rr][s], v);
      // One rounding to bf16 per value; values outside the rows or the row are zeros.
      uint4 y;
      uint32_t* yw = &y.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * j] * rstd[rr] * wv[2 * j],
                                                       v[2 * j + 1] * rstd[rr] * wv[2 * j + 1]);
        yw[j] = ok ? *reinterpret_cast<const uint32_t*>(&b) : 0u;
      }
      fp8_detail::Bf16x8ToFloat(y, v);
      uint2 codes;
      const float sc = fp8_detail::QuantizeHalfGroup8(v, codes);
      if (c < h) *reinterpret_cast<uint2*>(q + r * h + c) = codes;
      if (lane % 16 == 0 && c < h) scale[(c / 128) * mp + r] = sc;
    }
  }
}

__global__ void rmsnorm_fp8_kernel(const __nv_bfloat16* x, int64_t ldx, const __nv_bfloat16* w,
                                   float weight_offset, int64_t m, int64_t mp, int64_t h,
                                   float eps, bool vec_ok, uint8_t* q, float* scale) {
  __shared__ float partial[kWarps];
  const int64_t r = blockIdx.x;
  if (r >= m) return ZeroPaddingRow(r, mp, h, q, scale);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t groups = (h + 127) / 128;
  const __nv_bfloat16* xr = x + r * ldx;
  float ss = 0.f;
  for (int64_t g = warp; g < groups; g += kWarps) {
    const int len = static_cast<int>(h - g * 128 < 128 ? h - g * 128 : 128);
    float v[4];
    fp8_detail::LoadGroup4(xr + g * 128, len, lane, vec_ok, v);
    ss += QuadSquares(v);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  const float rstd = rsqrtf(SumOfWarps(partial) / h + eps);
  const bool packed_ok = h % 4 == 0;
  for (int64_t g = warp; g < groups; g += kWarps) {
    const int len = static_cast<int>(h - g * 128 < 128 ? h - g * 128 : 128);
    float xv[4], wv[4], v[4];
    fp8_detail::LoadGroup4(xr + g * 128, len, lane, vec_ok, xv);
    fp8_detail::LoadGroup4(w + g * 128, len, lane, vec_ok, wv);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = lane * 4 + j < len
                 ? __bfloat162float(__float2bfloat16(NormValue(xv[j], rstd, weight_offset, wv[j])))
                 : 0.f;
    const float sc = fp8_detail::QuantizeGroup128(v, q + r * h + g * 128, len, lane, packed_ok);
    if (lane == 0) scale[g * mp + r] = sc;
  }
}

using RegsKernel = decltype(&rmsnorm_fp8_regs_kernel<1, kRegRows>);
constexpr RegsKernel kRegsKernels[kMaxRegSlots] = {
    &rmsnorm_fp8_regs_kernel<1, kRegRows>, &rmsnorm_fp8_regs_kernel<2, kRegRows>,
    &rmsnorm_fp8_regs_kernel<3, kRegRows>, &rmsnorm_fp8_regs_kernel<4, kRegRows>};

}  // namespace

cudaError_t LaunchRmsNormFp8(const void* x, int64_t ldx, const void* w, float weight_offset,
                             int64_t m, int64_t mp, int64_t h, float eps, uint8_t* q,
                             float* scale, cudaStream_t s) {
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  const auto* wb = static_cast<const __nv_bfloat16*>(w);
  const int64_t slots = ((h + 127) / 128 + 2 * kWarps - 1) / (2 * kWarps);
  if (h % 8 == 0 && fp8_detail::OctAligned(x, ldx) && fp8_detail::OctAligned(w, 0) &&
      slots <= kMaxRegSlots) {
    kRegsKernels[slots - 1]<<<static_cast<unsigned>(mp / kRegRows), kThreads, 0, s>>>(
        xb, ldx, wb, weight_offset, m, mp, h, eps, q, scale);
  } else {
    const bool vec_ok = fp8_detail::QuadAligned(x, ldx) && fp8_detail::QuadAligned(w, 0);
    rmsnorm_fp8_kernel<<<static_cast<unsigned>(mp), kThreads, 0, s>>>(
        xb, ldx, wb, weight_offset, m, mp, h, eps, vec_ok, q, scale);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels
