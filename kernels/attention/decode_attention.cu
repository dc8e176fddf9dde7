// CUDA kernel of decode_attention.h. One CTA per (query head, new token); its kWarps warps
// split the visible keys [0, past + i] round-robin. Lane l owns dims l + 32 * c. Each warp
// keeps an online softmax (running max, sum and weighted V) over its keys; the warps'
// partial results are merged through shared memory at the end. Memory-bound and simple: a
// verify step has few queries, so the keys are read ~once per (query, head) from L2.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/core/dtype.h"  // Stream (no fmt: nvcc compiles this file)

namespace tandem::kernels::attention_internal {
namespace {

constexpr int kWarps = 8;
constexpr float kLog2e = 1.4426950408889634f;

template <int DPL>  // dims per lane: ceil(head_dim / 32); lanes past head_dim idle
__global__ void cached_attention_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                        const __nv_bfloat16* v, int b, int p, int hq, int hk,
                                        int d, float scale, __nv_bfloat16* out) {
  __shared__ float s_m[kWarps], s_l[kWarps], s_acc[kWarps][DPL * 32];
  const int h = blockIdx.x, i = blockIdx.y, kh = h / (hq / hk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int last = p - b + i;  // newest visible key
  float qv[DPL], acc[DPL];
  const size_t qoff = (static_cast<size_t>(i) * hq + h) * d;
#pragma unroll
  for (int c = 0; c < DPL; ++c) {
    const bool on = lane + 32 * c < d;
    qv[c] = on ? __bfloat162float(q[qoff + lane + 32 * c]) * scale * kLog2e : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = warp; j <= last; j += kWarps) {
    const size_t koff = (static_cast<size_t>(j) * hk + kh) * d;
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      if (lane + 32 * c < d) s += qv[c] * __bfloat162float(k[koff + lane + 32 * c]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    const float mx = fmaxf(m, s);
    const float f = exp2f(m - mx), w = exp2f(s - mx);
    l = l * f + w;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      acc[c] = acc[c] * f + (lane + 32 * c < d ? w * __bfloat162float(v[koff + lane + 32 * c])
                                               : 0.0f);
    m = mx;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int c = 0; c < DPL; ++c) s_acc[warp][lane + 32 * c] = acc[c];
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
    for (int c = 0; c < DPL; ++c) o[c] += s_acc[w][lane + 32 * c] * f;
  }
  const float inv = 1.0f / gl;  // key 0 is always visible: gl >= 1
#pragma unroll
  for (int c = 0; c < DPL; ++c)
    if (lane + 32 * c < d) out[qoff + lane + 32 * c] = __float2bfloat16(o[c] * inv);
}

}  // namespace

cudaError_t LaunchCachedAttention(int64_t b, int64_t p, int64_t hq, int64_t hk, int64_t d,
                                  const void* q, const void* k, const void* v, float scale,
                                  void* out, Stream stream) {
  const dim3 grid(static_cast<unsigned>(hq), static_cast<unsigned>(b));
  auto launch = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
        static_cast<const __nv_bfloat16*>(v), static_cast<int>(b), static_cast<int>(p),
        static_cast<int>(hq), static_cast<int>(hk), static_cast<int>(d), scale,
        static_cast<__nv_bfloat16*>(out));
  };
  if (d <= 32) launch(cached_attention_kernel<1>);
  else if (d <= 64) launch(cached_attention_kernel<2>);
  else if (d <= 128) launch(cached_attention_kernel<4>);
  else if (d <= 256) launch(cached_attention_kernel<8>);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace tandem::kernels::attention_internal
