// CUDA kernel of decode_attention.h. One CTA per (query head, new token); its kWarps warps
// take the visible keys [0, past + i] in tiles of kTile consecutive keys, round-robin. Lane
// l owns the DPL contiguous dims [l * DPL, l * DPL + DPL) (one vector load per row when the
// rows allow it). Per tile a warp computes kTile independent dot products, reduces them
// together across the lanes and folds them into its online softmax (running max, sum and
// weighted V) with one rescale: kTile loads and shuffles are in flight at once instead of
// one dependent chain per key. The warps' partial results are merged through shared memory
// at the end. Memory-bound: a verify step has few queries, so the keys are read ~once per
// (query, head) from L2.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/core/dtype.h"  // Stream (no fmt: nvcc compiles this file)

namespace tandem::kernels::attention_internal {
namespace {

constexpr int kWarps = 8;
constexpr int kTile = 8;  // keys per warp iteration
constexpr float kLog2e = 1.4426950408889634f;

// Loads this lane's DPL dims of one row as floats; dims at or past d read 0. kVec: d is a
// multiple of DPL and the row is aligned to DPL bf16, so one vector load does it.
template <int DPL, bool kVec>
__device__ __forceinline__ void load_row(const __nv_bfloat16* row, int lane, int d,
                                         float (&x)[DPL]) {
  const int base = lane * DPL;
  if constexpr (kVec && DPL >= 2) {
    if (base < d) {
      __nv_bfloat162 pair[DPL / 2];
      if constexpr (DPL == 2) {
        *reinterpret_cast<uint32_t*>(pair) = *reinterpret_cast<const uint32_t*>(row + base);
      } else if constexpr (DPL == 4) {
        *reinterpret_cast<uint2*>(pair) = *reinterpret_cast<const uint2*>(row + base);
      } else {
        static_assert(DPL % 8 == 0);
#pragma unroll
        for (int c = 0; c < DPL / 8; ++c)
          reinterpret_cast<uint4*>(pair)[c] = reinterpret_cast<const uint4*>(row + base)[c];
      }
#pragma unroll
      for (int c = 0; c < DPL / 2; ++c) {
        const float2 f = __bfloat1622float2(pair[c]);
        x[2 * c] = f.x;
        x[2 * c + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int c = 0; c < DPL; ++c) x[c] = 0.0f;
    }
  } else {
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      x[c] = base + c < d ? __bfloat162float(row[base + c]) : 0.0f;
  }
}

template <int DPL, bool kVec>  // dims per lane: ceil(head_dim / 32)
__global__ void __launch_bounds__(kWarps * 32)
    cached_attention_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                            const __nv_bfloat16* v, int b, int p, int hq, int hk, int d,
                            float scale, __nv_bfloat16* out) {
  __shared__ float s_m[kWarps], s_l[kWarps], s_acc[kWarps][DPL * 32];
  const int h = blockIdx.x, i = blockIdx.y, kh = h / (hq / hk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int last = p - b + i;  // newest visible key
  const size_t qoff = (static_cast<size_t>(i) * hq + h) * d;
  float qv[DPL], acc[DPL];
  load_row<DPL, false>(q + qoff, lane, d, qv);
#pragma unroll
  for (int c = 0; c < DPL; ++c) {
    qv[c] *= scale * kLog2e;
    acc[c] = 0.0f;
  }
  const size_t kstride = static_cast<size_t>(hk) * d;
  const __nv_bfloat16* kbase = k + static_cast<size_t>(kh) * d;
  const __nv_bfloat16* vbase = v + static_cast<size_t>(kh) * d;
  float m = -INFINITY, l = 0.0f;
  for (int j0 = warp * kTile; j0 <= last; j0 += kWarps * kTile) {
    float s[kTile];
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      s[t] = 0.0f;
      if (j0 + t <= last) {
        float kv[DPL];
        load_row<DPL, kVec>(kbase + (j0 + t) * kstride, lane, d, kv);
#pragma unroll
        for (int c = 0; c < DPL; ++c) s[t] += qv[c] * kv[c];
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
#pragma unroll
      for (int t = 0; t < kTile; ++t) s[t] += __shfl_xor_sync(0xffffffffu, s[t], off);
    float mx = m;
#pragma unroll
    for (int t = 0; t < kTile; ++t)
      if (j0 + t <= last) mx = fmaxf(mx, s[t]);
    const float f = exp2f(m - mx);  // m = -inf on the first tile: f = 0
    l *= f;
#pragma unroll
    for (int c = 0; c < DPL; ++c) acc[c] *= f;
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      if (j0 + t > last) continue;
      const float w = exp2f(s[t] - mx);
      l += w;
      float vv[DPL];
      load_row<DPL, kVec>(vbase + (j0 + t) * kstride, lane, d, vv);
#pragma unroll
      for (int c = 0; c < DPL; ++c) acc[c] += w * vv[c];
    }
    m = mx;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int c = 0; c < DPL; ++c) s_acc[warp][lane * DPL + c] = acc[c];
  __syncthreads();
  if (warp != 0) return;
  float gm = -INFINITY;
  for (int w = 0; w < kWarps; ++w) gm = fmaxf(gm, s_m[w]);
  float gl = 0.0f, o[DPL] = {};
  for (int w = 0; w < kWarps; ++w) {
    if (s_l[w] == 0.0f) continue;  // a warp that saw no key
    const float f = exp2f(s_m[w] - gm);
    gl += s_l[w] * f;
#pragma unroll
    for (int c = 0; c < DPL; ++c) o[c] += s_acc[w][lane * DPL + c] * f;
  }
  const float inv = 1.0f / gl;  // key 0 is always visible: gl >= 1
#pragma unroll
  for (int c = 0; c < DPL; ++c)
    if (lane * DPL + c < d) out[qoff + lane * DPL + c] = __float2bfloat16(o[c] * inv);
}

template <int DPL>
void launch_dpl(bool vec, dim3 grid, const __nv_bfloat16* q, const __nv_bfloat16* k,
                const __nv_bfloat16* v, int b, int p, int hq, int hk, int d, float scale,
                __nv_bfloat16* out, Stream stream) {
  if (vec)
    cached_attention_kernel<DPL, true><<<grid, kWarps * 32, 0, stream>>>(q, k, v, b, p, hq, hk,
                                                                         d, scale, out);
  else
    cached_attention_kernel<DPL, false><<<grid, kWarps * 32, 0, stream>>>(q, k, v, b, p, hq,
                                                                          hk, d, scale, out);
}

}  // namespace

cudaError_t LaunchCachedAttention(int64_t b, int64_t p, int64_t hq, int64_t hk, int64_t d,
                                  const void* q, const void* k, const void* v, float scale,
                                  void* out, Stream stream) {
  const dim3 grid(static_cast<unsigned>(hq), static_cast<unsigned>(b));
  const int dpl = d <= 32 ? 1 : d <= 64 ? 2 : d <= 128 ? 4 : d <= 256 ? 8 : 0;
  if (dpl == 0) return cudaErrorInvalidValue;
  // Vector loads: every K/V row starts on a DPL-element boundary (d a multiple of DPL and
  // the bases aligned to DPL bf16).
  const uintptr_t align = static_cast<uintptr_t>(dpl) * 2;
  const bool vec = d % dpl == 0 && reinterpret_cast<uintptr_t>(k) % align == 0 &&
                   reinterpret_cast<uintptr_t>(v) % align == 0;
  const auto* qb = static_cast<const __nv_bfloat16*>(q);
  const auto* kb = static_cast<const __nv_bfloat16*>(k);
  const auto* vb = static_cast<const __nv_bfloat16*>(v);
  auto* ob = static_cast<__nv_bfloat16*>(out);
  const int B = static_cast<int>(b), P = static_cast<int>(p), HQ = static_cast<int>(hq),
            HK = static_cast<int>(hk), D = static_cast<int>(d);
  switch (dpl) {
    case 1: launch_dpl<1>(vec, grid, qb, kb, vb, B, P, HQ, HK, D, scale, ob, stream); break;
    case 2: launch_dpl<2>(vec, grid, qb, kb, vb, B, P, HQ, HK, D, scale, ob, stream); break;
    case 4: launch_dpl<4>(vec, grid, qb, kb, vb, B, P, HQ, HK, D, scale, ob, stream); break;
    default: launch_dpl<8>(vec, grid, qb, kb, vb, B, P, HQ, HK, D, scale, ob, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels::attention_internal
