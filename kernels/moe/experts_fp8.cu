// CUDA slot quantizer of the FP8 expert path (kernels/moe/experts_fp8.h): one thread scans
// the offsets into the slot starts, then one warp per (slot row, 128-column group) finds its
// expert by binary search over the starts and quantizes the group (QuantizeGroup128: the
// CPU reference's math), or writes zeros with scale 1 past the expert's rows.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/gemm/fp8_device.cuh"
#include "kernels/moe/moe_kernels.h"

namespace tandem::kernels {
namespace {

__device__ __forceinline__ int64_t SlotRows(int64_t n) {
  if (n == 0) return 0;
  if (n <= 16) return 16;
  int bits = 64 - __clzll(static_cast<unsigned long long>(n));
  const int shift = bits - 4 > 4 ? bits - 4 : 4;
  const int64_t step = int64_t{1} << shift;
  return (n + step - 1) / step * step;
}

__global__ void moe_fp8_slots_kernel(const int32_t* offsets, int32_t* slots, int64_t e) {
  int64_t s = 0;
  slots[0] = 0;
  for (int64_t x = 0; x < e; ++x) {
    s += SlotRows(offsets[x + 1] - offsets[x]);
    slots[x + 1] = static_cast<int32_t>(s);
  }
}

__global__ void moe_fp8_quantize_slots_kernel(const __nv_bfloat16* x, int64_t ldx,
                                              bool from_slots, const int32_t* offsets,
                                              const int32_t* slots, int64_t e_count,
                                              int64_t total, int64_t k, uint8_t* codes,
                                              float* scale) {
  const int lane = threadIdx.x % 32;
  const int64_t groups = (k + 127) / 128, items = total * groups;
  const bool packed_ok = k % 4 == 0;
  for (int64_t item = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; item < items;
       item += int64_t{gridDim.x} * blockDim.x / 32) {
    const int64_t r = item / groups, g = item % groups;
    // The largest e with slots[e] <= r: empty experts share their start with the next one.
    int64_t lo = 0, hi = e_count - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (slots[mid] <= r) lo = mid;
      else hi = mid - 1;
    }
    const int64_t e = lo, m = r - slots[e], slot = slots[e + 1] - slots[e];
    const int64_t n = offsets[e + 1] - offsets[e];
    const int len = static_cast<int>(k - g * 128 < 128 ? k - g * 128 : 128);
    uint8_t* dst = codes + r * k + g * 128;
    float* sc = scale + slots[e] * groups + g * slot + m;
    if (m >= n) {
      fp8_detail::ZeroGroup128(dst, len, lane);
      if (lane == 0) *sc = 1.f;
      continue;
    }
    const __nv_bfloat16* src = x + ((from_slots ? slots[e] : offsets[e]) + m) * ldx + g * 128;
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = lane * 4 + j;
      v[j] = c < len ? __bfloat162float(src[c]) : 0.f;
    }
    const float q = fp8_detail::QuantizeGroup128(v, dst, len, lane, packed_ok);
    if (lane == 0) *sc = q;
  }
}

}  // namespace

cudaError_t LaunchMoeQuantizeFp8Slots(const void* x, int64_t ldx, bool from_slots,
                                      const int32_t* offsets, int32_t* slots, int64_t e,
                                      int64_t total, int64_t k, uint8_t* codes, float* scale,
                                      Stream s) {
  moe_fp8_slots_kernel<<<1, 1, 0, s>>>(offsets, slots, e);
  const int64_t warps = total * ((k + 127) / 128);
  if (warps == 0) return cudaGetLastError();
  const int64_t blocks = (warps * 32 + 255) / 256;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
  moe_fp8_quantize_slots_kernel<<<grid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(x), ldx,
                                                     from_slots, offsets, slots, e, total, k,
                                                     codes, scale);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
