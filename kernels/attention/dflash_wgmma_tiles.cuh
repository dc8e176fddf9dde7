// Internal to kernels/attention: what the query-major wgmma kernels (dflash_wgmma_fwd.cu,
// dflash_wgmma_bwd.cu) share above the instruction wrappers of kernels/core/wgmma.cuh: async
// loads of 64-row 128-byte-swizzled tiles (query rows, a tile's K or V rows) and the visibility
// mask of a block's key tiles. One warpgroup (128 threads) per (block b, KV head g); M = 64
// rows = the group's 4 query heads x 16 slots; keys stream in 64-key tiles (mma::TileOf: the
// block's context range, then its own 16 keys).
// Thread-safety: device functions only; nothing global.
#pragma once

#include "kernels/attention/dflash_mma_device.cuh"
#include "kernels/core/wgmma.cuh"

namespace tandem::kernels::attention_internal::wg {

// Async-loads 64 rows into an SW128 tile with threads tid = 0 .. nthreads - 1; row r comes
// from src + row_of(r) * D, rows >= n are zero-filled (their P is 0, and 0 * garbage could
// be NaN).
template <int D, typename RowOf>
__device__ inline void LoadTile(uint8_t* dst, const mma::bf16_t* src, int n, RowOf row_of,
                                int tid, int nthreads) {
  // A thread keeps one 16-byte column c and rows r0 + k * step; step % 8 == 0, so its
  // swizzled offset only moves by whole rows.
  constexpr int kChunks = D / 8;
  const int c = (tid % kChunks) * 8, r0 = tid / kChunks, step = nthreads / kChunks;
  uint8_t* d = dst + wgmma::Sw128(64, r0, c);
  for (int r = r0; r < 64; r += step, d += step * 128) {
    const bool valid = r < n;
    mma::CpAsync16(d, src + row_of(valid ? r : 0) * D + c, valid);
  }
}

// The K (is_v false) or V rows of tile t of KV head g, by the whole CTA.
template <int D>
__device__ inline void LoadKeyTile(const mma::Params& p, const mma::Tile& t, int g, bool is_v,
                                   uint8_t* dst) {
  const void* src = is_v ? (t.blk ? p.vb : p.vc) : (t.blk ? p.kb : p.kc);
  auto row_of = [&](int r) { return static_cast<size_t>(t.first + r) * p.hk + g; };
  LoadTile<D>(dst, static_cast<const mma::bf16_t*>(src), t.n, row_of, threadIdx.x, blockDim.x);
}

// The block's 64 query rows of KV head g's 4 query heads from x (Q or dO, [nb * 16, hq, D]),
// row h * 16 + slot = (token 16 b + slot, head 4 g + h), by the CTA's one warpgroup.
template <int D>
__device__ inline void LoadQueryTile(const mma::Params& p, const void* x, int b, int g,
                                     uint8_t* dst) {
  auto row_of = [&](int r) {
    return static_cast<size_t>(b * kBlock + r % kBlock) * p.hq + g * kWgmmaGroup + r / kBlock;
  };
  LoadTile<D>(dst, static_cast<const mma::bf16_t*>(x), 64, row_of, threadIdx.x, 128);
}

// Query slot `slot` of the block sees key `key` of tile t: context keys inside the block's
// range [lo, hi) under the window, its own 16 keys (keys 0 .. 15 of its own-key tile) under the
// window and (causal) key <= slot.
// Tile-level predicates, no per-warp state: the values steering control flow stay uniform.
struct Mask {
  int lo, hi;
  // Every key of the tile visible to every slot (an interior context tile): no masking.
  __device__ bool Full(const mma::Tile& t, int floor) const {
    return !t.blk && t.first >= lo && t.first + mma::kTk <= hi && floor <= 1 - kBlock;
  }
  __device__ int Floor(const mma::Tile& t, int window) const {
    return t.blk ? WindowFloor(0, window) : WindowFloor(hi - t.first, window);
  }
  __device__ bool Visible(const mma::Tile& t, bool causal, int floor, int key, int slot) const {
    if (t.blk) return key < kBlock && key - slot >= floor && (!causal || key <= slot);
    const int abs = t.first + key;
    return abs >= lo && abs < hi && key - slot >= floor;
  }
};

// Block b's mask, its range read from lane 0: values that steer control flow must be
// warp-uniform for the compiler, since a wgmma on a path ptxas cannot prove convergent is
// serialized (C7518).
__device__ inline Mask UniformMask(const mma::Params& p, int b) {
  Mask mask;
  mma::ContextRange(p, b, &mask.lo, &mask.hi);
  mask.lo = __shfl_sync(0xffffffffu, mask.lo, 0);
  mask.hi = __shfl_sync(0xffffffffu, mask.hi, 0);
  return mask;
}

// acc += A B over a 64-key tile's 4 16-key steps, one commit group (the forward's O += P V,
// the query-major backward's dQ += dS K): A = `a`, bf16 register fragments per 16 keys; B =
// the SW128 tile at shared address `tile` (64 keys x D), read MN-major through the transpose
// bit. `a` must stay untouched until the group is done.
template <int D>
__device__ inline void IssueRsTile(uint32_t tile, const uint32_t (&a)[mma::kTk / 16][4],
                                   float (&acc)[D / 8][4]) {
  wgmma::Fence();
#pragma unroll
  for (int kc = 0; kc < mma::kTk / 16; ++kc)
    wgmma::MmaRSTransB<D>(acc, a[kc], wgmma::Desc(tile + kc * 16 * 128, mma::kTk * 128, 1024));
  wgmma::Commit();
}

}  // namespace tandem::kernels::attention_internal::wg
