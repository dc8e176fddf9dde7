// CUDA MoE routing and combine.
// Router: one warp per token; the warp holds the token's logits in shared memory, takes the
// max and the fp32 softmax denominator by warp reductions, then k rounds of a warp argmax over
// the experts not yet taken (ties: the lower index), as the CPU reference orders them.
// Permutation: counts by atomics into offsets[1..E], one thread scans them, then one block
// per expert walks the assignments in order and places its own with a block-wide prefix of
// ballots, so the order within an expert is the assignment order (deterministic).
// Padded layout: one thread per padded row, then one per assignment.
// Combine: one block per token, fp32 sums in the reference's order, one rounding.
#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/moe/moe_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
constexpr int kWarp = 32;
constexpr int kRouterWarps = 4;

__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  if (bi < 0) return i >= 0;
  if (i < 0) return false;
  return v > bv || (v == bv && i < bi);
}

template <typename T>
__device__ __forceinline__ float Load(const T* p, int64_t i);
template <>
__device__ __forceinline__ float Load<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float Load<bf16_t>(const bf16_t* p, int64_t i) {
  return __bfloat162float(p[i]);
}

template <typename T>
__global__ void moe_router_kernel(int32_t* ids, float* weights, const T* logits, int64_t t_count,
                                  int e, int k, bool normalize) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t t = blockIdx.x * int64_t{kRouterWarps} + warp;
  if (t >= t_count) return;
  float* l = smem + warp * e;
  float mx = -INFINITY;
  for (int i = lane; i < e; i += kWarp) {
    l[i] = Load(logits, t * e + i);
    mx = fmaxf(mx, l[i]);
  }
  for (int o = kWarp / 2; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int i = lane; i < e; i += kWarp) sum += expf(l[i] - mx);
  for (int o = kWarp / 2; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  uint32_t taken = 0;  // bit m: expert lane + 32 m was picked (E <= 1024)
  float picked = 0.f, my_w = 0.f;
  int my_id = 0;
  for (int j = 0; j < k; ++j) {
    float bv = 0.f;
    int bi = -1;
    for (int m = 0, i = lane; i < e; ++m, i += kWarp)
      if (!(taken >> m & 1u) && Better(l[i], i, bv, bi)) bv = l[i], bi = i;
    for (int o = kWarp / 2; o > 0; o /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (Better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (bi % kWarp == lane) taken |= 1u << (bi / kWarp);
    const float w = expf(bv - mx) / sum;
    picked += w;
    if (lane == j) my_w = w, my_id = bi;
  }
  if (lane < k) {
    ids[t * k + lane] = my_id;
    weights[t * k + lane] = normalize ? my_w / picked : my_w;
  }
}

__global__ void moe_count_kernel(int32_t* offsets, const int32_t* ids, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    atomicAdd(offsets + ids[i] + 1, 1);
}

__global__ void moe_scan_kernel(int32_t* offsets, int e) {
  offsets[0] = 0;
  for (int i = 1; i <= e; ++i) offsets[i] += offsets[i - 1];
}

constexpr int kPlaceThreads = 256;

__global__ void moe_place_kernel(int32_t* perm_token, int32_t* assign_row, const int32_t* offsets,
                                 const int32_t* ids, int64_t n, int k) {
  __shared__ int warp_counts[kPlaceThreads / kWarp];
  const int e = blockIdx.x, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int64_t next = offsets[e];
  if (offsets[e + 1] == next) return;  // no tokens for this expert
  for (int64_t start = 0; start < n; start += kPlaceThreads) {
    const int64_t i = start + threadIdx.x;
    const bool mine = i < n && ids[i] == e;
    const uint32_t ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kPlaceThreads / kWarp; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      total += warp_counts[w];
    }
    if (mine) {
      const int64_t r = next + before + __popc(ballot & ((1u << lane) - 1u));
      assign_row[i] = static_cast<int32_t>(r);
      perm_token[r] = static_cast<int32_t>(i / k);
    }
    next += total;
    __syncthreads();
  }
}

constexpr int kCombineThreads = 256;

// With row_scale (then channel_scale and ids too): each term's y value times
// row_scale[row] * channel_scale[expert, c] first (the FP8 experts' raw rows).
__global__ void moe_combine_kernel(bf16_t* out, const bf16_t* residual, const bf16_t* y,
                                   const int32_t* rows, const float* w, const bf16_t* shared,
                                   const float* shared_gate, const float* row_scale,
                                   const float* channel_scale, const int32_t* ids, int64_t h,
                                   int k) {
  const int64_t t = blockIdx.x;
  const float g = shared != nullptr ? 1.f / (1.f + expf(-shared_gate[t])) : 0.f;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < k; ++j) {
      const int64_t r = rows[t * k + j];
      float v = __bfloat162float(y[r * h + c]);
      if (row_scale != nullptr)
        v = __fmul_rn(__fmul_rn(v, row_scale[r]), channel_scale[int64_t{ids[t * k + j]} * h + c]);
      acc += w[t * k + j] * v;
    }
    if (shared != nullptr) acc += g * __bfloat162float(shared[t * h + c]);
    out[t * h + c] = __float2bfloat16_rn(__bfloat162float(residual[t * h + c]) + acc);
  }
}

}  // namespace

cudaError_t LaunchMoeRouter(int32_t* ids, float* weights, const void* logits, bool logits_f32,
                            int64_t t, int64_t e, int64_t k, bool normalize, Stream s) {
  const auto stream = static_cast<cudaStream_t>(s);
  const int64_t blocks = (t + kRouterWarps - 1) / kRouterWarps;
  const size_t smem = sizeof(float) * kRouterWarps * static_cast<size_t>(e);
  if (smem > 48 * 1024) {
    const cudaError_t err = logits_f32
        ? cudaFuncSetAttribute(moe_router_kernel<float>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem))
        : cudaFuncSetAttribute(moe_router_kernel<bf16_t>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  if (logits_f32) {
    moe_router_kernel<float><<<blocks, kRouterWarps * kWarp, smem, stream>>>(
        ids, weights, static_cast<const float*>(logits), t, static_cast<int>(e),
        static_cast<int>(k), normalize);
  } else {
    moe_router_kernel<bf16_t><<<blocks, kRouterWarps * kWarp, smem, stream>>>(
        ids, weights, static_cast<const bf16_t*>(logits), t, static_cast<int>(e),
        static_cast<int>(k), normalize);
  }
  return cudaGetLastError();
}

cudaError_t LaunchMoePermute(int32_t* offsets, int32_t* perm_token, int32_t* assign_row,
                             const int32_t* ids, int64_t n, int64_t e, int64_t k, Stream s) {
  const auto stream = static_cast<cudaStream_t>(s);
  cudaError_t err = cudaMemsetAsync(offsets, 0, sizeof(int32_t) * (e + 1), stream);
  if (err != cudaSuccess) return err;
  if (n > 0) {
    const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
    moe_count_kernel<<<blocks, 256, 0, stream>>>(offsets, ids, n);
  }
  moe_scan_kernel<<<1, 1, 0, stream>>>(offsets, static_cast<int>(e));
  if (n > 0)
    moe_place_kernel<<<e, kPlaceThreads, 0, stream>>>(perm_token, assign_row, offsets, ids, n,
                                                     static_cast<int>(k));
  return cudaGetLastError();
}

namespace {

__global__ void moe_pad_layout_kernel(int32_t* padded_token, int32_t* padded_row,
                                      const int32_t* offsets, const int32_t* perm_token,
                                      const int32_t* assign_row, const int32_t* ids, int64_t n,
                                      int64_t e, int64_t cap) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < e * cap + n; q += stride) {
    if (q < e * cap) {
      const int64_t x = q / cap, j = q % cap, begin = offsets[x];
      padded_token[q] = j < offsets[x + 1] - begin ? perm_token[begin + j] : 0;
    } else {
      const int64_t i = q - e * cap, x = ids[i];
      padded_row[i] = static_cast<int32_t>(x * cap + assign_row[i] - offsets[x]);
    }
  }
}

}  // namespace

cudaError_t LaunchMoePadLayout(int32_t* padded_token, int32_t* padded_row, const int32_t* offsets,
                               const int32_t* perm_token, const int32_t* assign_row,
                               const int32_t* ids, int64_t n, int64_t e, int64_t cap, Stream s) {
  const int64_t total = e * cap + n;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 8192);
  moe_pad_layout_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(s)>>>(
      padded_token, padded_row, offsets, perm_token, assign_row, ids, n, e, cap);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombine(void* out, const void* residual, const void* y, const int32_t* rows,
                             const float* w, const void* shared, const float* shared_gate,
                             const float* row_scale, const float* channel_scale,
                             const int32_t* ids, int64_t t, int64_t h, int64_t k, Stream s) {
  if (t == 0) return cudaSuccess;
  moe_combine_kernel<<<t, kCombineThreads, 0, static_cast<cudaStream_t>(s)>>>(
      static_cast<bf16_t*>(out), static_cast<const bf16_t*>(residual),
      static_cast<const bf16_t*>(y), rows, w, static_cast<const bf16_t*>(shared), shared_gate,
      row_scale, channel_scale, ids, h, static_cast<int>(k));
  return cudaGetLastError();
}

}  // namespace tandem::kernels
