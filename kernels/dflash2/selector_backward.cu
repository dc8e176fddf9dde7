// CUDA selector backward kernels (selector.h). SelectorScoresBackward: one warp per row; the
// lane owning rank chunk q sums S[q] = sum_j g_j * succ[id_j, q] over the row's candidates in
// slot order (registers), writes dproj = pred[prev] * S (deterministic) and adds
// proj * S into dpred[prev] and g_j * pred[prev] * proj into dsucc[id_j] with float atomics
// (bf16x8 / float4 when Rk % 8 == 0). Candidates with g_j == 0 (rows whose target is not
// covered) are skipped. CandidateHeadBackward: one CTA per row; its k coefficients
// dunary * t' in shared memory, each thread a column chunk (bf16x8 when H % 8 == 0) summed
// over the k LM-head rows in fp32, added to dhidden with one rounding.
#include "kernels/dflash2/selector_device.cuh"
#include "kernels/dflash2/selector_kernels.h"

namespace tandem::kernels::dflash2 {
namespace {

using cuda_detail::Bf16Pack;
using cuda_detail::FromF32;
using cuda_detail::LoadPack;
using cuda_detail::ToF32;
using selector_detail::bf16_t;
using selector_detail::kFull;
using selector_detail::kWarps;
using selector_detail::RowGrid;
using selector_detail::Vec8;

template <int kN>
__device__ __forceinline__ void AtomicAddN(float* p, const float (&v)[kN]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kN == 8) {
    atomicAdd(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
    atomicAdd(reinterpret_cast<float4*>(p) + 1, make_float4(v[4], v[5], v[6], v[7]));
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) atomicAdd(p + i, v[i]);
  }
#else
#pragma unroll
  for (int i = 0; i < kN; ++i) atomicAdd(p + i, v[i]);
#endif
}

// kN elements of a bf16 row at element offset q (kN == 8: one 16-byte load).
template <int kN>
__device__ __forceinline__ void LoadBf16(const bf16_t* p, float (&out)[kN]) {
  if constexpr (kN == 8) {
    const Bf16Pack<8> v = LoadPack<8>(p);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = v[i];
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) out[i] = __bfloat162float(p[i]);
  }
}

// P: proj's element type, DP: dproj's; kN: rank elements per lane step (8 or 1).
template <typename P, typename DP, int kN>
__global__ void __launch_bounds__(kWarps * 32)
    selector_bwd_kernel(DP* dproj, float* dpred, float* dsucc, const float* dscores,
                        const P* proj, const bf16_t* pred, const bf16_t* succ,
                        const int32_t* prev, const int32_t* ids, SelectorLaunchDims d) {
  __shared__ float g_s[kWarps][64];
  __shared__ int32_t id_s[kWarps][64];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k = d.k, rank = d.rank;
  for (int64_t row = int64_t{blockIdx.x} * kWarps + warp; row < d.rows;
       row += int64_t{gridDim.x} * kWarps) {
    const int64_t pv = prev[row];
    const bool pair = pv >= 0 && pv < d.vocab;
    __syncwarp();  // the previous row's reads of g_s / id_s are done
    float gl = 0.f;
    for (int j = lane; j < k; j += 32) {
      g_s[warp][j] = dscores[row * k + j];
      id_s[warp][j] = ids[row * k + j];
      gl = fmaxf(gl, fabsf(g_s[warp][j]));
    }
    __syncwarp();
    const bool any = __any_sync(kFull, gl > 0.f);
    for (int q = lane * kN; q < rank; q += 32 * kN) {
      float out[kN];
      if (!pair || !any) {
#pragma unroll
        for (int i = 0; i < kN; ++i) out[i] = 0.f;
      } else {
        float a[kN], p[kN], ap[kN], sum[kN];
        LoadBf16<kN>(pred + pv * rank + q, a);
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          p[i] = ToF32<P>(proj[row * rank + q + i]);
          ap[i] = a[i] * p[i];
          sum[i] = 0.f;
        }
        for (int j = 0; j < k; ++j) {
          const float gj = g_s[warp][j];
          if (gj == 0.f) continue;
          const int64_t id = id_s[warp][j];
          float b[kN], add[kN];
          LoadBf16<kN>(succ + id * rank + q, b);
#pragma unroll
          for (int i = 0; i < kN; ++i) {
            sum[i] += gj * b[i];
            add[i] = gj * ap[i];
          }
          AtomicAddN<kN>(dsucc + id * rank + q, add);
        }
        float add[kN];
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          out[i] = a[i] * sum[i];
          add[i] = p[i] * sum[i];
        }
        AtomicAddN<kN>(dpred + pv * rank + q, add);
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) dproj[row * rank + q + i] = FromF32<DP>(out[i]);
    }
  }
}

constexpr int kHeadThreads = 128;

// One CTA per row (grid-stride); kN: hidden elements per thread step (8 or 1).
template <int kN>
__global__ void __launch_bounds__(kHeadThreads)
    candidate_head_bwd_kernel(bf16_t* dhidden, const float* dunary, const float* values,
                              const int32_t* ids, const bf16_t* lm_head, float multiplier,
                              float softcap, int64_t rows, int k, int64_t hidden) {
  __shared__ float c_s[64];
  __shared__ int32_t id_s[64];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    __syncthreads();  // the previous row's reads are done
    if (threadIdx.x < k) {
      const float v = values[row * k + threadIdx.x];
      const float slope =
          softcap > 0.f ? multiplier * (1.f - (v / softcap) * (v / softcap)) : multiplier;
      c_s[threadIdx.x] = dunary[row * k + threadIdx.x] * slope;
      id_s[threadIdx.x] = ids[row * k + threadIdx.x];
    }
    __syncthreads();
    for (int64_t h = int64_t{threadIdx.x} * kN; h < hidden; h += int64_t{kHeadThreads} * kN) {
      float acc[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) acc[i] = 0.f;
      for (int j = 0; j < k; ++j) {
        const float c = c_s[j];
        if (c == 0.f) continue;
        float w[kN];
        LoadBf16<kN>(lm_head + int64_t{id_s[j]} * hidden + h, w);
#pragma unroll
        for (int i = 0; i < kN; ++i) acc[i] += c * w[i];
      }
      float dh[kN];
      LoadBf16<kN>(dhidden + row * hidden + h, dh);
#pragma unroll
      for (int i = 0; i < kN; ++i) dhidden[row * hidden + h + i] = __float2bfloat16_rn(dh[i] + acc[i]);
    }
  }
}

template <typename P, typename DP>
void LaunchBwd(void* dproj, float* dpred, float* dsucc, const float* dscores, const void* proj,
               const void* pred, const void* succ, const int32_t* prev, const int32_t* ids,
               const SelectorLaunchDims& d, bool v8, Stream s) {
  const unsigned grid = RowGrid(d.rows, kWarps);
  auto* dp = static_cast<DP*>(dproj);
  const auto* p = static_cast<const P*>(proj);
  const auto* a = static_cast<const bf16_t*>(pred);
  const auto* b = static_cast<const bf16_t*>(succ);
  if (v8)
    selector_bwd_kernel<P, DP, 8><<<grid, kWarps * 32, 0, s>>>(dp, dpred, dsucc, dscores, p, a, b, prev, ids, d);
  else
    selector_bwd_kernel<P, DP, 1><<<grid, kWarps * 32, 0, s>>>(dp, dpred, dsucc, dscores, p, a, b, prev, ids, d);
}

}  // namespace

cudaError_t LaunchSelectorScoresBackward(void* dproj, bool dproj_bf16, float* dpred, float* dsucc,
                                         const float* dscores, const void* proj, bool proj_bf16,
                                         const void* pred, const void* succ, const int32_t* prev,
                                         const int32_t* ids, const SelectorLaunchDims& d,
                                         Stream s) {
  const bool v8 = Vec8(d.rank, {dproj, dpred, dsucc, proj, pred, succ});
  if (proj_bf16 && dproj_bf16)
    LaunchBwd<bf16_t, bf16_t>(dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids, d, v8, s);
  else if (proj_bf16)
    LaunchBwd<bf16_t, float>(dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids, d, v8, s);
  else if (dproj_bf16)
    LaunchBwd<float, bf16_t>(dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids, d, v8, s);
  else
    LaunchBwd<float, float>(dproj, dpred, dsucc, dscores, proj, pred, succ, prev, ids, d, v8, s);
  return cudaGetLastError();
}

cudaError_t LaunchCandidateHeadBackward(void* dhidden, const float* dunary, const float* values,
                                        const int32_t* ids, const void* lm_head,
                                        float multiplier, float softcap, int64_t rows, int k,
                                        int64_t hidden, Stream s) {
  constexpr int64_t kMaxGrid = int64_t{1} << 20;
  const unsigned grid = static_cast<unsigned>(rows < kMaxGrid ? rows : kMaxGrid);
  auto* dh = static_cast<bf16_t*>(dhidden);
  const auto* w = static_cast<const bf16_t*>(lm_head);
  if (hidden % 8 == 0 && cuda_detail::Aligned16({dhidden, lm_head}))
    candidate_head_bwd_kernel<8><<<grid, kHeadThreads, 0, s>>>(dh, dunary, values, ids, w, multiplier, softcap, rows, k, hidden);
  else
    candidate_head_bwd_kernel<1><<<grid, kHeadThreads, 0, s>>>(dh, dunary, values, ids, w, multiplier, softcap, rows, k, hidden);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::dflash2
