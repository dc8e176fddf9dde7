// CUDA kernels for the global grad norm and AdamW (host side: adamw_cuda.cc).
// GradNorm: kGradNormBlocks blocks grid-stride over the grads, each writing its sum of
// squares and non-finite count to a partials buffer; one block then folds the partials in
// a fixed order (deterministic) and writes the stats. AdamW: one fused elementwise pass
// (float4 loads when every pointer is 16-byte aligned), reading clip scale, skip flag and
// step from device memory, so nothing waits for the host.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/core/device_props.h"
#include "kernels/optim/adamw_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kThreads = 256;

template <int kBlock>
__device__ float BlockSum(float v, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kBlock / 32 ? scratch[threadIdx.x] : 0.f;
  if (threadIdx.x < 32)
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads();
  return v;  // valid in thread 0
}

__global__ void __launch_bounds__(kThreads)
    grad_norm_partial_kernel(const float* __restrict__ g, int64_t n, bool vec,
                             float* __restrict__ partials) {
  __shared__ float scratch[kThreads / 32];
  float sq = 0.f, bad = 0.f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t tail = 0;
  if (vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = blockIdx.x * kThreads + threadIdx.x; i < n4; i += stride) {
      float4 x = reinterpret_cast<const float4*>(g)[i];
      sq += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
      bad += !isfinite(x.x) + !isfinite(x.y) + !isfinite(x.z) + !isfinite(x.w);
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + blockIdx.x * kThreads + threadIdx.x; i < n; i += stride) {
    sq += g[i] * g[i];
    bad += !isfinite(g[i]);
  }
  sq = BlockSum<kThreads>(sq, scratch);
  bad = BlockSum<kThreads>(bad, scratch);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sq;
    partials[2 * blockIdx.x + 1] = bad;
  }
}

__global__ void __launch_bounds__(1024)
    grad_norm_final_kernel(const float* __restrict__ partials, float max_norm,
                           float* __restrict__ stats) {
  __shared__ float scratch[32];
  float sq = 0.f, bad = 0.f;
  for (int i = threadIdx.x; i < kGradNormBlocks; i += 1024) {
    sq += partials[2 * i];
    bad += partials[2 * i + 1];
  }
  sq = BlockSum<1024>(sq, scratch);
  bad = BlockSum<1024>(bad, scratch);
  if (threadIdx.x == 0) {
    const bool nonfinite = bad > 0.f || !isfinite(sq);
    const float norm = sqrtf(sq);
    stats[kGradStatsNorm] = norm;
    stats[kGradStatsClip] =
        max_norm > 0.f && !nonfinite ? fminf(1.f, max_norm / (norm + 1e-6f)) : 1.f;
    stats[kGradStatsNonFinite] = nonfinite ? 1.f : 0.f;
    stats[kGradStatsSumSq] = sq;
  }
}

struct AdamWScalars {
  float clip, step_size, inv_sqrt_bc2, decay;
};

__device__ __forceinline__ float AdamWOne(const AdamWConfig& c, const AdamWScalars& k, float p,
                                          float g, float& m, float& v) {
  g *= k.clip;
  m = c.beta1 * m + (1.f - c.beta1) * g;
  v = c.beta2 * v + (1.f - c.beta2) * g * g;
  return p * k.decay - k.step_size * m / (sqrtf(v) * k.inv_sqrt_bc2 + c.eps);
}

template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(AdamWConfig c, float* __restrict__ p, const float* __restrict__ g,
                 float* __restrict__ m, float* __restrict__ v, __nv_bfloat16* __restrict__ pb,
                 int64_t n, const float* __restrict__ stats, const int32_t* __restrict__ step) {
  if (stats[kGradStatsNonFinite] != 0.f) return;
  const float t = static_cast<float>(*step + 1);
  AdamWScalars k;
  k.clip = stats[kGradStatsClip];
  k.step_size = c.lr / (1.f - powf(c.beta1, t));
  k.inv_sqrt_bc2 = 1.f / sqrtf(1.f - powf(c.beta2, t));
  k.decay = 1.f - c.lr * c.weight_decay;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t tail = 0;
  if constexpr (kVec) {
    const int64_t n4 = n / 4;
    for (int64_t i = blockIdx.x * kThreads + threadIdx.x; i < n4; i += stride) {
      float4 pp = reinterpret_cast<float4*>(p)[i];
      float4 gg = reinterpret_cast<const float4*>(g)[i];
      float4 mm = reinterpret_cast<float4*>(m)[i];
      float4 vv = reinterpret_cast<float4*>(v)[i];
      pp.x = AdamWOne(c, k, pp.x, gg.x, mm.x, vv.x);
      pp.y = AdamWOne(c, k, pp.y, gg.y, mm.y, vv.y);
      pp.z = AdamWOne(c, k, pp.z, gg.z, mm.z, vv.z);
      pp.w = AdamWOne(c, k, pp.w, gg.w, mm.w, vv.w);
      reinterpret_cast<float4*>(p)[i] = pp;
      reinterpret_cast<float4*>(m)[i] = mm;
      reinterpret_cast<float4*>(v)[i] = vv;
      if (pb) {
        __nv_bfloat162 lo = __float22bfloat162_rn(make_float2(pp.x, pp.y));
        __nv_bfloat162 hi = __float22bfloat162_rn(make_float2(pp.z, pp.w));
        uint2 packed;
        packed.x = *reinterpret_cast<uint32_t*>(&lo);
        packed.y = *reinterpret_cast<uint32_t*>(&hi);
        reinterpret_cast<uint2*>(pb)[i] = packed;
      }
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + blockIdx.x * kThreads + threadIdx.x; i < n; i += stride) {
    p[i] = AdamWOne(c, k, p[i], g[i], m[i], v[i]);
    if (pb) pb[i] = __float2bfloat16_rn(p[i]);
  }
}

__global__ void adamw_finish_step_kernel(const float* stats, int32_t* step) {
  if (stats[kGradStatsNonFinite] == 0.f) *step += 1;
}

bool Aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

int GridFor(int64_t work) {
  int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t{CurrentDeviceSmCount()} * 16)));
}

}  // namespace

cudaError_t LaunchGradNorm(const float* grads, int64_t n, float max_norm, float* partials,
                           float* stats, Stream s) {
  grad_norm_partial_kernel<<<kGradNormBlocks, kThreads, 0, s>>>(grads, n, Aligned(grads, 16),
                                                                 partials);
  grad_norm_final_kernel<<<1, 1024, 0, s>>>(partials, max_norm, stats);
  return cudaGetLastError();
}

cudaError_t LaunchAdamW(const AdamWConfig& cfg, float* params, const float* grads, float* m,
                        float* v, void* params_bf16, int64_t n, const float* stats,
                        const int32_t* step, Stream s) {
  auto* pb = static_cast<__nv_bfloat16*>(params_bf16);
  const bool vec = Aligned(params, 16) && Aligned(grads, 16) && Aligned(m, 16) &&
                   Aligned(v, 16) && Aligned(pb, 8);
  if (vec)
    adamw_kernel<true><<<GridFor(n / 4), kThreads, 0, s>>>(cfg, params, grads, m, v, pb, n,
                                                           stats, step);
  else
    adamw_kernel<false><<<GridFor(n), kThreads, 0, s>>>(cfg, params, grads, m, v, pb, n, stats,
                                                        step);
  return cudaGetLastError();
}

cudaError_t LaunchAdamWFinishStep(const float* stats, int32_t* step, Stream s) {
  adamw_finish_step_kernel<<<1, 1, 0, s>>>(stats, step);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
