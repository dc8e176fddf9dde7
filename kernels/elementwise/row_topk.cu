// CUDA row top-k. Algorithm: one block of 1024 threads per row. A radix select over the
// order-preserving 32-bit keys of row_topk.h (8 bits a pass, most significant first: a
// shared-memory histogram of the keys that match the prefix found so far, then thread 0 picks
// the digit holding the k-th largest) finds the k-th largest key exactly and how many entries
// equal to it are kept. A last pass walks the row in index order, 1024 entries at a time, and a
// block-wide prefix sum places every kept entry at its rank by index, so the output is the
// CPU reference's, whatever the thread count.
#include <cstdint>

#include "kernels/elementwise/row_topk_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// internal::TopKKey (row_topk.h) on the device.
__device__ __forceinline__ uint32_t Key(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0;  // NaN
  if (bits == 0x80000000u) bits = 0;                 // -0 == +0
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// Exclusive prefix sum of x over the block; *total = the block's sum. sums: shared, kWarps + 1.
__device__ __forceinline__ uint32_t BlockExclusiveScan(uint32_t x, uint32_t* total,
                                                       uint32_t* sums) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t inc = x;
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, inc, off);
    if (lane >= off) inc += y;
  }
  if (lane == 31) sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const uint32_t w = sums[lane];  // kWarps == 32
    uint32_t winc = w;
    for (int off = 1; off < 32; off <<= 1) {
      const uint32_t y = __shfl_up_sync(0xffffffffu, winc, off);
      if (lane >= off) winc += y;
    }
    sums[lane] = winc - w;
    if (lane == 31) sums[kWarps] = winc;
  }
  __syncthreads();
  const uint32_t out = sums[warp] + inc - x;
  *total = sums[kWarps];
  __syncthreads();  // sums is reused by the next call
  return out;
}

__global__ void __launch_bounds__(kThreads)
    row_topk_kernel(int32_t* ids, float* vals, const float* x, int64_t v, uint32_t k) {
  static_assert(kWarps == 32, "the scan's second level is one warp");
  const float* row = x + int64_t{blockIdx.x} * v;
  __shared__ uint32_t hist[256];
  __shared__ uint32_t found_prefix, found_remaining;
  __shared__ uint32_t sums[kWarps + 1];
  uint32_t prefix = 0, mask = 0, remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < v; j += kThreads) {
      const uint32_t key = Key(__ldg(row + j));
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t above = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (above + hist[d] >= remaining) break;
        above += hist[d];
      }
      found_prefix = prefix | (static_cast<uint32_t>(d) << shift);
      found_remaining = remaining - above;
    }
    __syncthreads();
    prefix = found_prefix;
    remaining = found_remaining;
    mask |= 255u << shift;
  }
  // Keep every key above the k-th largest and the first `remaining` equal to it.
  int32_t* out_ids = ids + int64_t{blockIdx.x} * k;
  float* out_vals = vals + int64_t{blockIdx.x} * k;
  uint32_t gt_before = 0, eq_before = 0;
  for (int64_t base = 0; base < v; base += kThreads) {
    const int64_t j = base + threadIdx.x;
    const float f = j < v ? __ldg(row + j) : 0.f;
    const uint32_t key = Key(f);
    const uint32_t gt = j < v && key > prefix, eq = j < v && key == prefix;
    uint32_t total;
    const uint32_t pre = BlockExclusiveScan(gt | (eq << 16), &total, sums);  // counts < 2^16
    const uint32_t g = gt_before + (pre & 0xffffu), e = eq_before + (pre >> 16);
    if (gt || (eq && e < remaining)) {
      const uint32_t pos = g + min(e, remaining);
      out_ids[pos] = static_cast<int32_t>(j);
      out_vals[pos] = f;
    }
    gt_before += total & 0xffffu;
    eq_before += total >> 16;
  }
}

}  // namespace

cudaError_t LaunchRowTopK(int32_t* ids, float* vals, const float* x, int64_t rows, int64_t v,
                          int64_t k, Stream s) {
  if (rows > 0x7fffffff || v > 0x7fffffff) return cudaErrorInvalidValue;
  row_topk_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(ids, vals, x, v,
                                                                   static_cast<uint32_t>(k));
  return cudaGetLastError();
}

}  // namespace tandem::kernels
