// CUDA row top-k of transformed logits (row_topk.h). One block of kThreads per row.
//
// Fast path (one read of the row, sometimes two). The transform z = tr(x) is non-decreasing
// in x, so the order keys of x bound those of z:
//   1. each thread keeps its four largest order keys of x with their ids; the k-th largest of
//      the kThreads maxima, L, has at least k entries at or above it;
//   2. the candidates are the entries with key(x) >= L (at most kMaxCandidates): the kept ones,
//      unless some thread's fourth key is >= L (it may have dropped some), in which case a
//      second read of the row collects them;
//   3. each candidate's rank among the candidates (higher key of z first, then lower id) is
//      counted; the k best are the answer, and T, the k-th one's key of z, bounds the rest;
//   4. an entry left out has x at most the value just below L (the next lower bf16 value for
//      bf16 rows, the next lower float for f32 ones), so its z is at most tr of that value.
//      If that bound is below T nothing left out can tie with or beat the k-th candidate and
//      the answer stands. Otherwise (the cap's saturation, runs of equal logits) or when the
//      candidates overflow, the block falls back to the exact radix select below.
// Only the candidates' z are computed (tanhf per candidate instead of per entry and pass).
//
// Fallback (exact radix select):
//   1. radix select over the order keys of z (8 bits a pass, most significant first): a
//      shared histogram (integer atomics) of the keys matching the prefix found so far, and
//      warp 0 picks the digit holding the k-th largest. After four passes the k-th largest
//      key T is known, and how many entries equal to T are kept (`take`).
//   2. a pass collects the entries with key > T (fewer than k) into shared slots;
//   3. a walk of the row in index order, kThreads entries at a time, with a block prefix
//      count, collects the `take` lowest-index entries equal to T;
//   4. each candidate's output rank is the number of candidates ordered before it (higher
//      key, or equal key and lower id).
// Both paths are exact and deterministic, whatever the scheduling, and give the same answer.
// z is recomputed from the logit in every pass (no row-sized scratch); full-row passes read
// the row in 16-byte vectors when it is aligned.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dflash2/row_topk_kernels.h"

namespace tandem::kernels::dflash2 {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxK = 64;  // kLogitsTopKMax
constexpr int kMaxCandidates = 1024;  // the fast path's candidate slots

// The order key of kernels/elementwise/row_topk.h: grows with the value, -0 == +0, NaN lowest.
__device__ __forceinline__ uint32_t Key(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0;
  if (bits == 0x80000000u) bits = 0;
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// The value whose order key is `key` (the inverse of Key for keys of non-NaN values).
__device__ __forceinline__ float FromKey(uint32_t key) {
  return __uint_as_float(key & 0x80000000u ? key & 0x7fffffffu : ~key);
}

// The largest value of the row's type whose order key is below `key` (key > 0): one step
// down in key order, then down to the nearest bf16 value for bf16 rows.
__device__ __forceinline__ float Below(uint32_t key, bool is_bf16) {
  const uint32_t k1 = key - 1;
  if (!is_bf16) return FromKey(k1);
  // Keys of bf16 values have their low 16 bits 0 (positive) or 0xffff (negative); the largest
  // bf16 key at or below k1 clears them, or sets them if that stays at or below k1.
  const uint32_t pos = k1 & 0xffff0000u, neg = (k1 & 0xffff0000u) | 0xffffu;
  const uint32_t bk = (neg <= k1 && !(neg & 0x80000000u)) ? neg : (pos & 0x80000000u ? pos : pos - 1u);
  return FromKey(bk);
}

__device__ __forceinline__ float Load(const float* p) { return __ldg(p); }
__device__ __forceinline__ float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// Calls f(j, x[j]) for every j < vocab; each thread sees its entries in increasing j: 16-byte
// loads when `vec` (the row 16-byte aligned), two in flight per thread, then the tail element
// by element.
template <typename T, typename F>
__device__ __forceinline__ void ForRow(const T* x, int64_t vocab, bool vec, F&& f) {
  constexpr int kPer = 16 / sizeof(T);
  int64_t done = 0;
  if (vec) {
    const int64_t nvec = vocab / kPer;
    const uint4* v = reinterpret_cast<const uint4*>(x);
    for (int64_t i = threadIdx.x; i < nvec; i += 2 * kThreads) {
      const bool second = i + kThreads < nvec;
      const uint4 a = __ldg(v + i);
      const uint4 b = second ? __ldg(v + i + kThreads) : uint4{};
      const T* e = reinterpret_cast<const T*>(&a);
#pragma unroll
      for (int q = 0; q < kPer; ++q) f(i * kPer + q, ToFloat(e[q]));
      if (second) {
        const T* e2 = reinterpret_cast<const T*>(&b);
#pragma unroll
        for (int q = 0; q < kPer; ++q) f((i + kThreads) * kPer + q, ToFloat(e2[q]));
      }
    }
    done = nvec * kPer;
  }
  for (int64_t j = done + threadIdx.x; j < vocab; j += kThreads) f(j, Load(x + j));
}

struct Transform {
  float multiplier, softcap, inv;  // inv = multiplier / softcap
  __device__ __forceinline__ float operator()(float x) const {
    return softcap > 0.f ? softcap * tanhf(x * inv) : x * multiplier;
  }
};

struct Shared {
  uint32_t hist[256];
  uint32_t warp_counts[kWarps];
  uint32_t prefix, mask, need;  // key bits fixed so far, their mask, entries still to find
  uint32_t greater;             // candidates collected with key > T
  int32_t cand_id[kMaxK];
  float cand_val[kMaxK];
  uint32_t cand_key[kMaxK];
};

// Warp 0: the digit (bits `shift` .. shift+7) holding the need-th largest key among the
// histogram; updates prefix / mask / need.
__device__ void PickDigit(Shared& sh, int shift) {
  const int lane = threadIdx.x % 32;
  // Lane l owns digits 255 - 8l .. 248 - 8l (highest first).
  uint32_t own = 0;
  for (int i = 0; i < 8; ++i) own += sh.hist[255 - lane * 8 - i];
  uint32_t above = own;  // inclusive prefix over lanes 0..lane
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, above, off);
    if (lane >= off) above += y;
  }
  above -= own;  // exclusive: count in higher digits
  const uint32_t need = sh.need;
  const bool here = above < need && need <= above + own;
  const unsigned ballot = __ballot_sync(0xffffffffu, here);
  if (lane == __ffs(ballot) - 1) {
    uint32_t cum = above;
    for (int i = 0; i < 8; ++i) {
      const int digit = 255 - lane * 8 - i;
      const uint32_t c = sh.hist[digit];
      if (cum + c >= need) {
        sh.prefix |= static_cast<uint32_t>(digit) << shift;
        sh.mask |= 0xffu << shift;
        sh.need = need - cum;
        break;
      }
      cum += c;
    }
  }
}

// The exact radix select (the fallback) of row x; ids and values point at the row's outputs.
template <typename T>
__device__ void RadixTopK(Shared& sh, const T* __restrict__ x, int64_t vocab, bool vec,
                          Transform tr, int k, int32_t* __restrict__ ids,
                          float* __restrict__ values) {
  __syncthreads();  // the fast path's reads of sh are done
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.mask = 0;
    sh.need = k;
    sh.greater = 0;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = sh.prefix, mask = sh.mask;
    ForRow(x, vocab, vec, [&](int64_t, float v) {
      const uint32_t key = Key(tr(v));
      if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 0xffu], 1u);
    });
    __syncthreads();
    if (threadIdx.x < 32) PickDigit(sh, shift);
    __syncthreads();
  }
  const uint32_t kth = sh.prefix, take = sh.need;  // keep `take` entries equal to kth
  ForRow(x, vocab, vec, [&](int64_t j, float v) {
    const float z = tr(v);
    const uint32_t key = Key(z);
    if (key > kth) {
      const uint32_t slot = atomicAdd(&sh.greater, 1u);
      sh.cand_id[slot] = static_cast<int32_t>(j);
      sh.cand_val[slot] = z;
      sh.cand_key[slot] = key;
    }
  });
  __syncthreads();
  const uint32_t greater = sh.greater;  // == k - take
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t taken = 0;
  for (int64_t base = 0; base < vocab && taken < take; base += kThreads) {
    const int64_t j = base + threadIdx.x;
    float z = 0.f;
    bool flag = false;
    if (j < vocab) {
      z = tr(Load(x + j));
      flag = Key(z) == kth;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) sh.warp_counts[warp] = __popc(ballot);
    __syncthreads();
    uint32_t before = __popc(ballot & ((1u << lane) - 1u)), total = 0;
    for (int w = 0; w < kWarps; ++w) {
      const uint32_t c = sh.warp_counts[w];
      if (w < warp) before += c;
      total += c;
    }
    if (flag && taken + before < take) {
      const uint32_t slot = greater + taken + before;
      sh.cand_id[slot] = static_cast<int32_t>(j);
      sh.cand_val[slot] = z;
      sh.cand_key[slot] = kth;
    }
    taken += total;
    __syncthreads();  // warp_counts is rewritten by the next tile
  }
  __syncthreads();
  if (threadIdx.x < k) {
    const int i = threadIdx.x;
    const uint32_t key = sh.cand_key[i];
    const int32_t id = sh.cand_id[i];
    int rank = 0;
    for (int c = 0; c < k; ++c)
      rank += sh.cand_key[c] > key || (sh.cand_key[c] == key && sh.cand_id[c] < id);
    ids[rank] = id;
    if (values != nullptr) values[rank] = sh.cand_val[i];
  }
}


__device__ __forceinline__ void Swap(uint32_t& a, uint32_t& b, int32_t& ia, int32_t& ib) {
  const uint32_t t = a;
  a = b, b = t;
  const int32_t u = ia;
  ia = ib, ib = u;
}

// The fast path's candidates (they share the block's shared memory with Shared).
struct Candidates {
  uint32_t thread_max[kThreads];  // each thread's largest key of x
  uint32_t count;                 // candidates seen (may exceed kMaxCandidates)
  uint32_t threshold;             // L
  uint32_t kth;                   // T, the key of z of the k-th best candidate
  int32_t id[kMaxCandidates];
  float z[kMaxCandidates];
  uint32_t key[kMaxCandidates];   // order key of z
};

// Candidate i's rank among the n: those with a higher key of z, or an equal key and a lower id.
__device__ __forceinline__ uint32_t RankOf(const Candidates& c, uint32_t n, uint32_t i) {
  const uint32_t key = c.key[i];
  const int32_t id = c.id[i];
  uint32_t rank = 0;
  for (uint32_t o = 0; o < n; ++o) rank += c.key[o] > key || (c.key[o] == key && c.id[o] < id);
  return rank;
}

// Candidates with key(x) >= L, ranked; returns false (block-uniform) when the answer is not
// proven, having written nothing.
template <typename T>
__device__ bool FastTopK(Candidates& c, const T* __restrict__ x, int64_t vocab, bool vec,
                         bool is_bf16, Transform tr, int k, int32_t* __restrict__ ids,
                         float* __restrict__ values) {
  // Each thread's four largest keys of x (0: empty) with their ids, largest first.
  uint32_t k0 = 0, k1 = 0, k2 = 0, k3 = 0;
  int32_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  ForRow(x, vocab, vec, [&](int64_t j, float v) {
    const uint32_t key = Key(v);
    if (key > k3) {
      k3 = key, i3 = static_cast<int32_t>(j);
      if (k3 > k2) Swap(k2, k3, i2, i3);
      if (k2 > k1) Swap(k1, k2, i1, i2);
      if (k1 > k0) Swap(k0, k1, i0, i1);
    }
  });
  const uint32_t mine = k0;
  c.thread_max[threadIdx.x] = mine;
  if (threadIdx.x == 0) c.count = 0;
  __syncthreads();
  {  // L = the k-th largest thread maximum (ties by thread index: exactly one rank k - 1)
    uint32_t rank = 0;
    for (int j = 0; j < kThreads; ++j) {
      const uint32_t o = c.thread_max[j];
      rank += o > mine || (o == mine && j < static_cast<int>(threadIdx.x));
    }
    if (rank == static_cast<uint32_t>(k - 1)) c.threshold = mine;
  }
  __syncthreads();
  const uint32_t lo = c.threshold;
  auto add = [&](int32_t j, float v) {
    const uint32_t slot = atomicAdd(&c.count, 1u);
    if (slot < kMaxCandidates) {
      c.id[slot] = j;
      c.z[slot] = v;  // x for now; z below
    }
  };
  // A thread whose fourth key is >= L may have dropped entries >= L: then read the row again.
  // Otherwise every entry >= L is among the kept keys.
  if (__syncthreads_or(lo == 0 || k3 >= lo)) {
    ForRow(x, vocab, vec, [&](int64_t j, float v) {
      if (Key(v) >= lo) add(static_cast<int32_t>(j), v);
    });
  } else {
    if (k0 >= lo) add(i0, FromKey(k0));
    if (k1 >= lo) add(i1, FromKey(k1));
    if (k2 >= lo) add(i2, FromKey(k2));
  }
  __syncthreads();
  const uint32_t n = c.count;
  if (n > kMaxCandidates) return false;
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
    c.z[i] = tr(c.z[i]);
    c.key[i] = Key(c.z[i]);
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += kThreads)
    if (RankOf(c, n, i) == static_cast<uint32_t>(k - 1)) c.kth = c.key[i];
  __syncthreads();
  // Everything left out has key(x) < L, so key(z) <= key(tr(the value just below L)).
  const bool proven = lo == 0 || Key(tr(Below(lo, is_bf16))) < c.kth;
  if (!proven) return false;
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
    const uint32_t rank = RankOf(c, n, i);
    if (rank < static_cast<uint32_t>(k)) {
      ids[rank] = c.id[i];
      if (values != nullptr) values[rank] = c.z[i];
    }
  }
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_topk_kernel(const T* __restrict__ logits, int64_t ld, int64_t vocab, Transform tr, int k,
                    int32_t* __restrict__ ids, float* __restrict__ values) {
  __shared__ union {
    Shared radix;
    Candidates fast;
  } sh;
  const T* x = logits + blockIdx.x * ld;
  const bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  int32_t* row_ids = ids + blockIdx.x * int64_t{k};
  float* row_values = values != nullptr ? values + blockIdx.x * int64_t{k} : nullptr;
  constexpr bool kBf16 = sizeof(T) == 2;
  if (FastTopK(sh.fast, x, vocab, vec, kBf16, tr, k, row_ids, row_values)) return;
  RadixTopK(sh.radix, x, vocab, vec, tr, k, row_ids, row_values);
}

}  // namespace

cudaError_t LaunchRowTopK(const void* logits, bool is_bf16, int64_t rows, int64_t ld, int64_t vocab,
                          float multiplier, float softcap, int k, int32_t* ids, float* values,
                          Stream s) {
  if (rows == 0) return cudaSuccess;
  if (k < 1 || k > kMaxK || k > vocab || rows > 0x7fffffff) return cudaErrorInvalidValue;
  const Transform tr{multiplier, softcap, softcap > 0.f ? multiplier / softcap : 0.f};
  const unsigned grid = static_cast<unsigned>(rows);
  if (is_bf16)
    row_topk_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(logits), ld, vocab, tr, k, ids, values);
  else
    row_topk_kernel<float><<<grid, kThreads, 0, s>>>(static_cast<const float*>(logits), ld, vocab,
                                                     tr, k, ids, values);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::dflash2
