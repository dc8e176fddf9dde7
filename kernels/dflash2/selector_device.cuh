// Device helpers shared by the selector kernels (selector.cu, selector_backward.cu,
// selector_walk.cu): warp reductions with every lane holding the same bits (xor butterflies),
// the first-maximum argmax, and one row's candidate scores. A row belongs to one warp; slots
// j and j + 32 of its k <= 64 candidates live in lane j. Include only from .cu files.
// Thread-safety: n/a (device code).
#pragma once

#include <climits>
#include <cmath>
#include <initializer_list>

#include "kernels/dflash2/selector_kernels.h"
#include "kernels/elementwise/elementwise_vec.cuh"

namespace tandem::kernels::dflash2::selector_detail {

using bf16_t = __nv_bfloat16;
using cuda_detail::Bf16Pack;
using cuda_detail::LoadPack;
using cuda_detail::ToF32;

constexpr int kWarps = 4;  // warps (rows in flight) per CTA of the row kernels
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
// The first slot holding the largest value (slots of invalid lanes carry -inf and INT_MAX).
__device__ __forceinline__ int WarpArgmax(float v, int slot) {
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(kFull, v, o);
    const int os = __shfl_xor_sync(kFull, slot, o);
    if (ov > v || (ov == v && os < slot)) v = ov, slot = os;
  }
  return slot;
}
// Lane-local best of the two slots a lane holds, then across the warp.
__device__ __forceinline__ int RowArgmax(const float (&s)[2], int lane, int k) {
  float v = lane < k ? s[0] : -INFINITY;
  int slot = lane < k ? lane : INT_MAX;
  if (lane + 32 < k && s[1] > v) v = s[1], slot = lane + 32;
  return WarpArgmax(v, slot);
}

// sum_q ap[q] * b[q] in every lane.
template <bool kVec8>
__device__ __forceinline__ float PairDot(const float* ap, const bf16_t* b, int rank, int lane) {
  float acc = 0.f;
  if constexpr (kVec8) {
    for (int c = lane; c < rank / 8; c += 32) {
      const Bf16Pack<8> v = LoadPack<8>(b + c * 8);
      const float4 a0 = *reinterpret_cast<const float4*>(ap + c * 8);
      const float4 a1 = *reinterpret_cast<const float4*>(ap + c * 8 + 4);
      acc += a0.x * v[0] + a0.y * v[1] + a0.z * v[2] + a0.w * v[3] + a1.x * v[4] + a1.y * v[5] +
             a1.z * v[6] + a1.w * v[7];
    }
  } else {
    for (int q = lane; q < rank; q += 32) acc += ap[q] * __bfloat162float(b[q]);
  }
  return WarpSum(acc);
}

// s[0], s[1]: the scores of slots lane and lane + 32 of `row` paired with `pv` (the unary
// alone when pv is outside the vocabulary). ap: this warp's rank floats of shared memory.
template <typename P, bool kVec8>
__device__ void RowScores(float (&s)[2], float* ap, const P* proj, const bf16_t* pred,
                          const bf16_t* succ, int64_t pv, const int32_t* ids,
                          const float* unary, int64_t row, const SelectorLaunchDims& d,
                          int lane) {
  const int k = d.k, rank = d.rank;
  const bool pair = pv >= 0 && pv < d.vocab;
  __syncwarp();  // the previous row's reads of ap are done
  if (pair)
    for (int q = lane; q < rank; q += 32)
      ap[q] = __bfloat162float(pred[pv * rank + q]) * ToF32<P>(proj[row * rank + q]);
  __syncwarp();
  s[0] = lane < k ? unary[row * k + lane] : 0.f;
  s[1] = lane + 32 < k ? unary[row * k + lane + 32] : 0.f;
  if (!pair) return;
  for (int j = 0; j < k; ++j) {
    const float dot = PairDot<kVec8>(ap, succ + int64_t{ids[row * k + j]} * rank, rank, lane);
    if (j == lane) s[0] += dot;
    if (j == lane + 32) s[1] += dot;
  }
}

// CTAs for `work` rows at `per_cta` rows per CTA, at most 16 per SM (grid-stride beyond).
inline unsigned RowGrid(int64_t work, int per_cta) {
  const int64_t max_ctas = int64_t{CurrentDeviceSmCount()} * 16;
  int64_t g = (work + per_cta - 1) / per_cta;
  if (g > max_ctas) g = max_ctas;
  return static_cast<unsigned>(g < 1 ? 1 : g);
}

// bf16x8 loads along the rank: Rk % 8 == 0 and 16-byte aligned bases.
inline bool Vec8(int rank, std::initializer_list<const void*> ptrs) {
  return rank % 8 == 0 && cuda_detail::Aligned16(ptrs);
}

}  // namespace tandem::kernels::dflash2::selector_detail
