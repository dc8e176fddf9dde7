// Internal to kernels/attention: device helpers shared by the tensor-core DFlash kernels
// (dflash_mma.cu forward, dflash_mma_bwd.cu backward): the PTX wrappers of kernels/core/ptx.cuh
// (fragment layouts there), A fragments from accumulators, and the key tiles of a block (its
// context range, then its own keys).
// Shared rows are padded by 16 bytes, so ldmatrix reads are conflict-free.
// Thread-safety: device functions only; nothing global.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/dflash_mma_internal.h"
#include "kernels/core/ptx.cuh"

namespace tandem::kernels::attention_internal::mma {

using Params = DFlashKernelParams;
using bf16_t = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kTk = kMmaTileKeys;
constexpr int kPs = kTk + 8;  // row stride (elements) of the backward's P / dS tiles

// The forward stages Q (16 rows per warp) in the second (K, V) stage; both kernels fit the
// H100/H200 opt-in shared memory (227 KiB) at the largest group.
static_assert(DFlashMmaSmemBytes(true, kMmaMaxGroup, 128) <= 227 * 1024);
static_assert(DFlashMmaSmemBytes(false, kMmaMaxGroup, 128) <= 227 * 1024);
static_assert(kBlock == 16, "one m16 tile per query head");

using ptx::CpAsync16;
using ptx::CpAsyncCommit;
using ptx::CpAsyncWait;
using ptx::Ldsm4;
using ptx::Ldsm4T;
using ptx::Mma;
using ptx::Pack;
using ptx::SmemAddr;

// 2^x (MUFU.EX2, 2 ulp, flush-to-zero): softmax arguments are <= ~0, underflow to 0 is
// intended, and 2^-inf == 0.
__device__ inline float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// A operand (16 rows x 16 keys, keys 16 * kc ..) from C accumulators over 8-key n-tiles.
__device__ inline void AFromC(uint32_t (&a)[4], const float (&c)[kTk / 8][4], int kc) {
  a[0] = Pack(c[2 * kc][0], c[2 * kc][1]);
  a[1] = Pack(c[2 * kc][2], c[2 * kc][3]);
  a[2] = Pack(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = Pack(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}

// Context range [lo, hi) of block b: the union of its slots' ranges under the window
// (slot 0 reaches furthest back), clamped to [0, t]; hi is the anchor.
__device__ inline void ContextRange(const Params& p, int b, int* lo, int* hi) {
  const int a = min(max(p.anchors[b], 0), p.t);
  const int s = min(max(p.doc_start[b], 0), a);
  *hi = a;
  *lo = max(s, WindowFloor(a, p.window));
}

// The backward's per-row statistics of this lane's rows gid and gid + 8 (lane = 4 gid + tig)
// of query head `head` in block b: lse in log2 units and delta = rowsum(dO O), the softmax's
// correction in dS = P (dP - delta), summed over the row's 4 lanes (each adds dims 2 tig,
// 2 tig + 1 of every 8). With store_delta, lane tig 0 also writes delta to p.delta (the split
// backward's context kernel reads it).
template <int D>
__device__ inline void RowStats(const Params& p, int b, int head, bool store_delta,
                                float (&lse2)[2], float (&delta)[2]) {
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const bf16_t* dout = static_cast<const bf16_t*>(p.dout);
  const bf16_t* o_in = static_cast<const bf16_t*>(p.o_in);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
    lse2[h] = p.lse_in[row] * kLog2e;
    float acc = 0.0f;
    for (int c = 2 * tig; c < D; c += 8) {
      const float2 x =
          __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dout + row * D + c));
      const float2 y =
          __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(o_in + row * D + c));
      acc += x.x * y.x + x.y * y.y;
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
    acc += __shfl_xor_sync(0xffffffffu, acc, 2);
    delta[h] = acc;
    if (store_delta && tig == 0) p.delta[row] = acc;
  }
}

// Stores this lane's part of a query-major accumulator of head `head` in block b, scaled by
// `scale`, as bf16 to dst [nb * 16, hq, D]: rows gid and gid + 8, columns 8 n + 2 tig, + 1
// (mma.sync's C layout; lane = 4 gid + tig).
template <int D>
__device__ inline void StoreQueryRows(void* dst, const Params& p, int b, int head,
                                      const float (&acc)[D / 8][4], float scale) {
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  bf16_t* out = static_cast<bf16_t*>(dst);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(out + row * D + n * 8 + 2 * tig) =
          __floats2bfloat162_rn(acc[n][2 * h] * scale, acc[n][2 * h + 1] * scale);
  }
}

// Tile `it` of block b: keys from the context (it < ctx_tiles) or the block itself.
struct Tile {
  bool blk;
  int first, n;  // first key row in its tensor, valid keys (1..kTk)
};
__device__ inline Tile TileOf(int it, int ctx_tiles, int lo, int hi, int b) {
  if (it == ctx_tiles) return {true, b * kBlock, kBlock};
  const int first = lo + it * kTk;
  return {false, first, min(kTk, hi - first)};
}

// Async-loads rows [first, first + n) of KV head g from k and v into [kTk][D + 8] tiles,
// zero-filling rows n .. kTk - 1 (their P is 0, and 0 * garbage could be NaN).
template <int D>
__device__ inline void LoadKv(const bf16_t* k, const bf16_t* v, const Tile& t, int g, int hk,
                              bf16_t* ks, bf16_t* vs) {
  constexpr int kChunks = D / 8, kStride = D + 8;
  for (int e = threadIdx.x; e < kTk * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = (e % kChunks) * 8;
    const bool valid = r < t.n;
    const size_t off = (static_cast<size_t>(t.first + (valid ? r : 0)) * hk + g) * D + c;
    CpAsync16(ks + r * kStride + c, k + off, valid);
    CpAsync16(vs + r * kStride + c, v + off, valid);
  }
}

// Async-loads the block's 16 * G query rows of heads g * G .. into [16 G][D + 8]; row
// w * 16 + slot holds (token b * 16 + slot, head g * G + w).
template <int D>
__device__ inline void LoadRows(const bf16_t* x, int b, int g, int group, int hq, bf16_t* xs) {
  constexpr int kChunks = D / 8, kStride = D + 8;
  for (int e = threadIdx.x; e < kBlock * group * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = (e % kChunks) * 8;
    const int w = r / kBlock, slot = r % kBlock;
    const size_t off = (static_cast<size_t>(b * kBlock + slot) * hq + g * group + w) * D + c;
    CpAsync16(xs + r * kStride + c, x + off, true);
  }
}

// The window bound of tile t for a block anchored at hi: query slot i sees key k of the
// tile only if k - i >= SlotFloor(...) (dflash_internal.h, WindowFloor).
__device__ inline int SlotFloor(const Tile& t, int hi, int window) {
  return t.blk ? WindowFloor(0, window) : WindowFloor(hi - t.first, window);
}

// Whether key `key` of tile t (a single block's keys: its context range or its own 16) is
// visible to query slot `slot`, given the tile's SlotFloor.
__device__ inline bool Visible(const Tile& t, bool causal, int floor, int key, int slot) {
  return key < t.n && key - slot >= floor && (!t.blk || !causal || key <= slot);
}

}  // namespace tandem::kernels::attention_internal::mma
