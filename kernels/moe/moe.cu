// CUDA MoE routing and combine.
// Router: one warp per token; the warp holds the token's logits in shared memory, takes the
// max and the fp32 softmax denominator by warp reductions, then k rounds of a warp argmax over
// the experts not yet taken (ties: the lower index), as the CPU reference orders them.
// Permutation, in chunks of kChunk assignments (kChunk >= E), one warp per chunk:
//   count: each full chunk's per-expert counts (shared-memory atomics), parked in the chunk's
//          own first E slots of assign_row (the only slots its placing warp overwrites);
//   scan:  one block: per expert, the counts turned into exclusive prefixes over the chunks in
//          place; the tail chunk (shorter than kChunk) counted; offsets by a block scan; the
//          tail placed by warp 0;
//   place: each full chunk's warp reads its prefixes, then walks its assignments 32 at a time
//          in order, ranking equal experts by __match_any_sync, so the order within an
//          expert is the assignment order (deterministic) and every assignment is read twice.
// Padded layout: one thread per padded row, then one per assignment.
// Combine: one block per token, fp32 sums in the reference's order, one rounding; 8 columns
// per thread with 16-byte loads where H % 8 == 0 and the rows are 16-byte aligned.
#include <algorithm>
#include <cstdint>

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

constexpr int kMaxExperts = 1024;  // kMoeMaxExperts (routing.h)
constexpr int kChunk = 1024;       // assignments per warp; >= kMaxExperts (the parked counts)
constexpr int kPermWarps = 8;
constexpr int kPerLane = kChunk / kWarp;

__device__ __forceinline__ uint32_t LanesBelow(int lane) { return (1u << lane) - 1u; }

// Places ids[begin, end) (end - begin <= kChunk) in order, from the rows in run[0, e) (shared,
// this warp's own), advancing them: one warp.
__device__ void PlaceChunk(int32_t* perm_token, int32_t* assign_row, int32_t* run,
                           const int32_t* ids, int64_t begin, int64_t end, int k, int lane) {
  int next = begin + lane < end ? ids[begin + lane] : -1;  // one step ahead
  for (int64_t i0 = begin; i0 < end; i0 += kWarp) {
    const int64_t i = i0 + lane;
    const bool valid = i < end;
    const int x = next;
    next = i + kWarp < end ? ids[i + kWarp] : -1;
    const uint32_t peers = __match_any_sync(0xffffffffu, x);
    const int32_t start = valid ? run[x] : 0;
    __syncwarp();
    if (valid) {
      if (lane == 31 - __clz(peers)) run[x] = start + __popc(peers);  // the group's last lane
      const int32_t r = start + __popc(peers & LanesBelow(lane));
      assign_row[i] = r;
      perm_token[r] = static_cast<int32_t>(i / k);
    }
    __syncwarp();
  }
}

// Full chunk c's counts per expert -> assign_row[c kChunk + x], x < e.
__global__ void moe_chunk_count_kernel(int32_t* assign_row, const int32_t* ids, int64_t chunks,
                                       int e) {
  extern __shared__ int32_t hist_all[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t c = blockIdx.x * int64_t{kPermWarps} + warp;
  if (c >= chunks) return;
  int32_t* hist = hist_all + warp * e;
  for (int x = lane; x < e; x += kWarp) hist[x] = 0;
  __syncwarp();
  const int32_t* chunk = ids + c * kChunk;
  int32_t mine[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) mine[j] = chunk[j * kWarp + lane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) atomicAdd(hist + mine[j], 1);
  __syncwarp();
  for (int x = lane; x < e; x += kWarp) assign_row[c * kChunk + x] = hist[x];
}

// One block of kScanThreads >= e threads: prefixes over the full chunks, the tail's counts,
// offsets, and the tail placed.
constexpr int kScanThreads = 1024;
constexpr int kScanBatch = 16;

__global__ void moe_chunk_scan_kernel(int32_t* offsets, int32_t* perm_token, int32_t* assign_row,
                                      const int32_t* ids, int64_t n, int64_t chunks, int e,
                                      int k) {
  __shared__ int32_t sums[kScanThreads];
  __shared__ int32_t tail[kScanThreads];
  const int x = threadIdx.x;
  int32_t running = 0;
  if (x < e) {
    for (int64_t c0 = 0; c0 < chunks; c0 += kScanBatch) {
      int32_t v[kScanBatch];
#pragma unroll
      for (int j = 0; j < kScanBatch; ++j)
        v[j] = c0 + j < chunks ? assign_row[(c0 + j) * kChunk + x] : 0;
#pragma unroll
      for (int j = 0; j < kScanBatch; ++j) {
        if (c0 + j < chunks) assign_row[(c0 + j) * kChunk + x] = running;
        running += v[j];
      }
    }
  }
  tail[x] = 0;
  __syncthreads();
  const int64_t tail_begin = chunks * kChunk;
  for (int64_t i = tail_begin + x; i < n; i += kScanThreads) atomicAdd(tail + ids[i], 1);
  __syncthreads();
  const int32_t total = x < e ? running + tail[x] : 0;
  sums[x] = total;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o *= 2) {  // inclusive scan (Hillis-Steele)
    const int32_t add = x >= o ? sums[x - o] : 0;
    __syncthreads();
    sums[x] += add;
    __syncthreads();
  }
  const int32_t start = sums[x] - total;  // exclusive
  if (x < e) offsets[x] = start;
  if (x == e) offsets[e] = start;  // sums[e] - 0 = n (x == e < kScanThreads when e < 1024)
  if (x == 0 && e == kScanThreads) offsets[e] = sums[kScanThreads - 1];
  __syncthreads();
  tail[x] = x < e ? start + running : 0;  // the tail's first row per expert
  __syncthreads();
  if (x < kWarp) PlaceChunk(perm_token, assign_row, tail, ids, tail_begin, n, k, x);
}

// Full chunk c: rows from offsets and its parked prefixes, then its assignments placed.
__global__ void moe_chunk_place_kernel(int32_t* perm_token, int32_t* assign_row,
                                       const int32_t* offsets, const int32_t* ids,
                                       int64_t chunks, int e, int k) {
  extern __shared__ int32_t run_all[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t c = blockIdx.x * int64_t{kPermWarps} + warp;
  if (c >= chunks) return;
  int32_t* run = run_all + warp * e;
  for (int x = lane; x < e; x += kWarp) run[x] = offsets[x] + assign_row[c * kChunk + x];
  __syncwarp();
  PlaceChunk(perm_token, assign_row, run, ids, c * kChunk, (c + 1) * kChunk, k, lane);
}

constexpr int kCombineThreads = 256;

// One block per token. With row_scale (then channel_scale and ids too): each term's y value
// times row_scale[row] * channel_scale[expert, c] first (the FP8 experts' raw rows).
// V columns per thread per step: 8 (16-byte loads; H % 8 == 0, rows 16-byte aligned) or 1.
template <int V>
struct Cols {
  float v[V];
};

template <int V>
__device__ __forceinline__ Cols<V> LoadBf16(const bf16_t* p) {
  Cols<V> out;
  if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 f = __bfloat1622float2(h2[q]);
      out.v[2 * q] = f.x;
      out.v[2 * q + 1] = f.y;
    }
  } else {
    out.v[0] = __bfloat162float(*p);
  }
  return out;
}

template <int V>
__device__ __forceinline__ Cols<V> LoadF32(const float* p) {
  Cols<V> out;
  if constexpr (V == 8) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    out.v[0] = a.x, out.v[1] = a.y, out.v[2] = a.z, out.v[3] = a.w;
    out.v[4] = b.x, out.v[5] = b.y, out.v[6] = b.z, out.v[7] = b.w;
  } else {
    out.v[0] = *p;
  }
  return out;
}

template <int V>
__global__ void moe_combine_kernel(bf16_t* out, const bf16_t* residual, const bf16_t* y,
                                   const int32_t* rows, const float* w, const bf16_t* shared,
                                   const float* shared_gate, const float* row_scale,
                                   const float* channel_scale, const int32_t* ids, int64_t h,
                                   int k) {
  const int64_t t = blockIdx.x;
  const float g = shared != nullptr ? 1.f / (1.f + expf(-shared_gate[t])) : 0.f;
  for (int64_t c = threadIdx.x * int64_t{V}; c < h; c += int64_t{blockDim.x} * V) {
    float acc[V] = {};
    for (int j = 0; j < k; ++j) {
      const int64_t r = rows[t * k + j];
      const float wj = w[t * k + j];
      Cols<V> v = LoadBf16<V>(y + r * h + c);
      if (row_scale != nullptr) {
        const float rs = row_scale[r];
        const Cols<V> cs = LoadF32<V>(channel_scale + int64_t{ids[t * k + j]} * h + c);
#pragma unroll
        for (int q = 0; q < V; ++q) v.v[q] = __fmul_rn(__fmul_rn(v.v[q], rs), cs.v[q]);
      }
#pragma unroll
      for (int q = 0; q < V; ++q) acc[q] += wj * v.v[q];
    }
    if (shared != nullptr) {
      const Cols<V> sv = LoadBf16<V>(shared + t * h + c);
#pragma unroll
      for (int q = 0; q < V; ++q) acc[q] += g * sv.v[q];
    }
    const Cols<V> res = LoadBf16<V>(residual + t * h + c);
    if constexpr (V == 8) {
      uint4 packed;
      __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        h2[q] = __floats2bfloat162_rn(res.v[2 * q] + acc[2 * q], res.v[2 * q + 1] + acc[2 * q + 1]);
      *reinterpret_cast<uint4*>(out + t * h + c) = packed;
    } else {
      out[t * h + c] = __float2bfloat16_rn(res.v[0] + acc[0]);
    }
  }
}

bool Aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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
  static_assert(kChunk >= kMaxExperts && kScanThreads >= kMaxExperts);
  const auto stream = static_cast<cudaStream_t>(s);
  const int64_t chunks = n / kChunk;  // full ones; the scan places the rest
  const int64_t blocks = (chunks + kPermWarps - 1) / kPermWarps;
  const size_t smem = sizeof(int32_t) * kPermWarps * static_cast<size_t>(e);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;  // e <= 1024: 32 KiB
  if (chunks > 0)
    moe_chunk_count_kernel<<<blocks, kPermWarps * kWarp, smem, stream>>>(assign_row, ids, chunks,
                                                                         static_cast<int>(e));
  moe_chunk_scan_kernel<<<1, kScanThreads, 0, stream>>>(offsets, perm_token, assign_row, ids, n,
                                                        chunks, static_cast<int>(e),
                                                        static_cast<int>(k));
  if (chunks > 0)
    moe_chunk_place_kernel<<<blocks, kPermWarps * kWarp, smem, stream>>>(
        perm_token, assign_row, offsets, ids, chunks, static_cast<int>(e), static_cast<int>(k));
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
  const auto stream = static_cast<cudaStream_t>(s);
  const bool vec = h % 8 == 0 && Aligned16(out) && Aligned16(residual) && Aligned16(y) &&
                   Aligned16(shared) && Aligned16(channel_scale);
  const auto launch = [&](auto kernel) {
    kernel<<<t, kCombineThreads, 0, stream>>>(
        static_cast<bf16_t*>(out), static_cast<const bf16_t*>(residual),
        static_cast<const bf16_t*>(y), rows, w, static_cast<const bf16_t*>(shared), shared_gate,
        row_scale, channel_scale, ids, h, static_cast<int>(k));
  };
  if (vec) launch(moe_combine_kernel<8>);
  else launch(moe_combine_kernel<1>);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
