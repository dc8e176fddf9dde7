// CUDA side of the packed causal attention that is not cuDNN: the fallback kernel and the
// small kernel that turns cu_seqlens into cuDNN's sequence-length and ragged-offset tensors.
//
// Fallback algorithm: one warp per (token i, query head h); lane l owns dims l + 32 * k. The
// warp walks keys j = doc_start .. i one at a time: a warp-shuffle dot product, then an
// online-softmax update (every lane holds the same running max and sum). Correct for any
// layout, memory-bound and slow (no tiling); it exists so the op always works.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention/varlen_internal.h"

namespace tandem::kernels::attention_internal {
namespace {

constexpr int kWarpsPerCta = 4;
constexpr float kLog2e = 1.4426950408889634f;

template <int DPL>  // dims per lane: head_dim / 32
__global__ void varlen_fallback_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                       const __nv_bfloat16* v, const int32_t* cu, int docs,
                                       int t, int hq, int hk, float scale, __nv_bfloat16* out,
                                       float* lse) {
  const int warp = blockIdx.x * kWarpsPerCta + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= t * hq) return;  // whole warps exit together
  const int i = warp / hq, h = warp % hq, kh = h / (hq / hk), d = DPL * 32;
  // The document of token i: the last entry of cu with cu[doc] <= i.
  int lo = 0, hi = docs;  // invariant: cu[lo] <= i < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= i) lo = mid; else hi = mid;
  }
  const int start = cu[lo];
  float qv[DPL], acc[DPL];
  const size_t qoff = (static_cast<size_t>(i) * hq + h) * d;
#pragma unroll
  for (int c = 0; c < DPL; ++c) {
    qv[c] = __bfloat162float(q[qoff + lane + 32 * c]) * scale * kLog2e;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = start; j <= i; ++j) {
    const size_t koff = (static_cast<size_t>(j) * hk + kh) * d;
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < DPL; ++c) s += qv[c] * __bfloat162float(k[koff + lane + 32 * c]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    const float mx = fmaxf(m, s);
    const float f = exp2f(m - mx), w = exp2f(s - mx);
    l = l * f + w;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      acc[c] = acc[c] * f + w * __bfloat162float(v[koff + lane + 32 * c]);
    m = mx;
  }
  const float inv = 1.0f / l;  // j = i is always visible: l >= 1
#pragma unroll
  for (int c = 0; c < DPL; ++c) out[qoff + lane + 32 * c] = __float2bfloat16(acc[c] * inv);
  if (lse != nullptr && lane == 0) lse[static_cast<size_t>(i) * hq + h] = (m + log2f(l)) / kLog2e;
}

__global__ void cudnn_aux_kernel(const int32_t* cu, int docs, int64_t qd, int64_t kvd,
                                 int64_t hq, int32_t* seq_len, int64_t* rq, int64_t* rkv,
                                 int64_t* rs) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= docs; i += gridDim.x * blockDim.x) {
    const int64_t c = cu[i];
    rq[i] = c * qd;
    rkv[i] = c * kvd;
    rs[i] = c * hq;
    if (i < docs) seq_len[i] = cu[i + 1] - cu[i];
  }
}

}  // namespace

cudaError_t LaunchVarlenFallback(int64_t t, int64_t docs, int64_t hq, int64_t hk, int64_t d, const void* q, const void* k, const void* v,
                            const int32_t* cu_seqlens, float scale, void* out, float* lse,
                            Stream stream) {
  const int64_t warps = t * hq;
  if (warps == 0) return cudaSuccess;
  const int blocks = static_cast<int>((warps + kWarpsPerCta - 1) / kWarpsPerCta);
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kWarpsPerCta * 32, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
        static_cast<const __nv_bfloat16*>(v), cu_seqlens, static_cast<int>(docs),
        static_cast<int>(t), static_cast<int>(hq), static_cast<int>(hk), scale,
        static_cast<__nv_bfloat16*>(out), lse);
  };
  switch (d) {
    case 64: launch(varlen_fallback_kernel<2>); break;
    case 128: launch(varlen_fallback_kernel<4>); break;
    case 256: launch(varlen_fallback_kernel<8>); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchCudnnAux(int64_t docs, int64_t hq, int64_t hk, int64_t d, const int32_t* cu_seqlens, int32_t* seq_len,
                      int64_t* ragged_q, int64_t* ragged_kv, int64_t* ragged_stats,
                      Stream stream) {
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((docs + threads) / threads, 1024));
  cudnn_aux_kernel<<<blocks, threads, 0, stream>>>(cu_seqlens, static_cast<int>(docs),
                                                   hq * d, hk * d, hq,
                                                   seq_len, ragged_q, ragged_kv, ragged_stats);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::attention_internal
