// Query-major DFlash block attention forward on Hopper warpgroup MMA (wgmma, sm_90a), GQA
// group 4, head_dim 64 or 128. Same contract as dflash_mma_fwd (dflash_mma.cu): out (bf16)
// and lse (f32, natural log) of every (query row, head), each written once by one thread (no
// atomics, a fixed summation order: runs repeat bitwise).
//
// A CTA takes kBlocks (1 or 2) consecutive blocks of KV head g, one warpgroup (4 warps) each;
// a warpgroup's M = 64 rows = the group's 4 query heads x 16 slots of its block, so warp w
// owns the 16 slots of head 4 g + w. The blocks share one key stream, loaded once for all of
// them (half the K/V traffic from L2 at kBlocks = 2; measured on the H200 it gains ~1% on
// sorted anchors and loses 2.3x on random ones, so kBlocks = 1 is the default): 64-key tiles
// over the union of their context ranges (KeyTiles: sorted anchors give ranges that nearly
// coincide; disjoint ones become separate segments, gaps skipped), then one tile of their own
// keys. Every warpgroup masks each key by its own block's range and window.
// Q is loaded once per warpgroup into a 128-byte-swizzled tile; K and V stream through two
// 2-stage cp.async rings. Per tile i and warpgroup:
//   S = Q K^T             (wgmma m64n64k16, Q and K K-major from shared memory);
//   online softmax of S   (registers, log2 domain, masks only on edge tiles);
//   O += P V              (wgmma m64nDk16, A = P as bf16 register fragments, B = the V tile
//                          read MN-major through the transpose bit).
// Software pipeline (FlashAttention-3's intra-warpgroup overlap): S(i) and P(i-1) V(i-1) are
// issued back to back, the softmax of S(i) is meant to run while P V is in flight, and O is
// rescaled only after it lands. (The SASS shows ptxas moving the exponentials behind the wait
// for P V and the tile barrier, so the tensor pipe idles through them; branch wgfwd-next
// issues S(i + 1) first instead.) K(i + 2) and V(i + 1) are loaded once one barrier per tile
// proves every warp is past S(i) and P(i-1) V(i-1), so each load has a whole tile of math to
// land.
// ptxas-visible rules against wgmma serialization: every MMA runs on every tile (masks zero
// what a slot does not see; no MMA under a branch), the first k-step of S only writes its
// accumulators, and P lives in registers of its own, never in S's.
#include <climits>

#include "kernels/attention/dflash_wgmma_internal.h"
#include "kernels/attention/dflash_wgmma_tiles.cuh"
#include "kernels/core/wgmma.cuh"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers
using wg::LoadKeyTile;
using wg::LoadTile;
using wg::Mask;

constexpr int kRows = 16 * kWgmmaGroup;  // query rows of a CTA (M of every wgmma)
constexpr int kThreads = 128;            // one warpgroup
constexpr int kN8 = kTk / 8;             // 8-key column groups of S
static_assert(kTk == 64 && kRows == 64, "the tiles are 64 x D");

// S = Q K^T of one tile, one commit group (Q and K: SW128 tiles at shared addresses qs, ks).
template <int D>
__device__ inline void IssueScores(uint32_t qs, uint32_t ks, float (&s)[kN8][4]) {
  constexpr uint32_t kPanel = kTk * 128;
  wgmma::Fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t off = (kk / 4) * kPanel + (kk % 4) * 32;
    const uint64_t a = wgmma::Desc(qs + off, 16, 1024), b = wgmma::Desc(ks + off, 16, 1024);
    if (kk == 0)
      wgmma::MmaSS64<false>(s, a, b);
    else
      wgmma::MmaSS64<true>(s, a, b);
  }
  wgmma::Commit();
}

// The CTA's key tiles: up to two segments of 64-key tiles covering the union of its blocks'
// context ranges (a range that starts inside the tiles of the one before joins its segment),
// then one tile of the blocks' own keys (16 nv <= 64 rows of kb / vb). Built from warp-
// uniform ranges, so the tile count steering the main loop is uniform too; plain scalars
// (no indexed arrays), so it stays in registers.
struct KeyTiles {
  int f0, h0, n0, f1, h1, n1;  // segment k: keys [fk, hk) in nk tiles
  int b0, nv;

  static constexpr int kEmpty = INT_MAX;
  __device__ static int TilesOf(int f, int h) { return h > f ? (h - f + kTk - 1) / kTk : 0; }
  // Ranges [lo0, hi0) and [lo1, hi1) (empty: hi <= lo) of blocks b0, b0 + 1 (nv of them).
  __device__ KeyTiles(int lo0, int hi0, int lo1, int hi1, int b0_, int nv_) : b0(b0_), nv(nv_) {
    if (hi0 <= lo0) lo0 = hi0 = kEmpty;
    if (hi1 <= lo1) lo1 = hi1 = kEmpty;
    const bool swap = lo1 < lo0;  // a = the range starting first
    const int la = swap ? lo1 : lo0, ha = swap ? hi1 : hi0;
    const int lb = swap ? lo0 : lo1, hb = swap ? hi0 : hi1;
    f0 = la;
    h0 = ha;
    n0 = la == kEmpty ? 0 : TilesOf(la, ha);
    const bool join = lb != kEmpty && lb < la + n0 * kTk;
    if (join) {
      h0 = max(ha, hb);
      n0 = TilesOf(f0, h0);
    }
    f1 = lb;
    h1 = hb;
    n1 = join || lb == kEmpty ? 0 : TilesOf(lb, hb);
  }
  __device__ int Count() const { return n0 + n1 + 1; }
  __device__ Tile Of(int i) const {
    if (i >= n0 + n1) return {true, b0 * kBlock, kBlock * nv};
    const bool second = i >= n0;
    const int f = (second ? f1 : f0) + (second ? i - n0 : i) * kTk;
    return {false, f, min(kTk, (second ? h1 : h0) - f)};
  }
};

// Online softmax state of this thread's two rows (gid, gid + 8 of its warp's head).
struct RowState {
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores (Q K^T, unscaled)
  float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum of P
};

// P = 2^((S - m) scale log2 e) of one tile with the row max m updated (keys a slot does not
// see masked out); alpha = the factor that rescales the rows' earlier O and l. Reads S only
// (P goes to `pf`).
__device__ inline void Softmax(const Mask& mask, const Tile& t, const Params& p, float qk_scale,
                               const float (&s)[kN8][4], RowState& st, float (&pf)[kN8][4],
                               float (&alpha)[2]) {
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int floor = mask.Floor(t, p.window);
  float mx[2] = {st.m[0], st.m[1]};
  if (mask.Full(t, floor)) {
#pragma unroll
    for (int n = 0; n < kN8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pf[n][e] = s[n][e];
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
  } else {
#pragma unroll
    for (int n = 0; n < kN8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n * 8 + 2 * tig + (e & 1), half = e >> 1;
        pf[n][e] = mask.Visible(t, p.causal, floor, key, gid + 8 * half) ? s[n][e] : -INFINITY;
        mx[half] = fmaxf(mx[half], pf[n][e]);
      }
  }
  float nm[2];  // -m * scale: P = 2^(s scale + nm)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    // A row that has seen no key yet keeps m = -inf; its P and alpha are 0 (not NaN).
    nm[h] = mx[h] == -INFINITY ? 0.0f : -mx[h] * qk_scale;
    alpha[h] = Exp2(fmaf(st.m[h], qk_scale, nm[h]));
    st.m[h] = mx[h];
    st.l[h] *= alpha[h];
  }
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      pf[n][e] = Exp2(fmaf(pf[n][e], qk_scale, nm[e >> 1]));
      st.l[e >> 1] += pf[n][e];
    }
}

template <int D, int kBlocks>
__global__ void __launch_bounds__(kThreads* kBlocks, 3 - kBlocks) dflash_wgmma_fwd(Params p) {
  constexpr int kTile = kTk * D * 2;  // bytes of a 64-row SW128 tile
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* qs = base;                    // warpgroup j: qs + j kTile, [64 rows][D], row
                                         // h * 16 + slot = (slot, head 4 g + h)
  uint8_t* ks = base + kBlocks * kTile;  // K of tile i at ks + (i % 2) kTile
  uint8_t* vs = ks + 2 * kTile;          // V of tile i at vs + (i % 2) kTile
  const int b0 = blockIdx.x * kBlocks, g = blockIdx.y, nv = min(kBlocks, p.nb - b0);
  const int wgi = threadIdx.x / kThreads, b = b0 + wgi;  // this warpgroup's block
  const int warp = threadIdx.x % kThreads / 32, lane = threadIdx.x % 32;
  const int gid = lane / 4, tig = lane % 4;
  // Values that steer control flow are read from lane 0 (warp-uniform for the compiler): a
  // wgmma on a path ptxas cannot prove convergent is serialized (C7518).
  static_assert(kBlocks == 1 || kBlocks == 2, "KeyTiles covers two ranges");
  int lo[2] = {0, 0}, hi[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < kBlocks; ++j) {
    if (j < nv) ContextRange(p, b0 + j, &lo[j], &hi[j]);
    lo[j] = __shfl_sync(0xffffffffu, lo[j], 0);
    hi[j] = __shfl_sync(0xffffffffu, hi[j], 0);
  }
  const KeyTiles keys(lo[0], hi[0], lo[1], hi[1], b0, nv);
  Mask mask;  // this warpgroup's block (a dead one, b >= nb: an empty range)
  mask.lo = wgi == 0 ? lo[0] : lo[1];
  mask.hi = wgi == 0 ? hi[0] : hi[1];
  mask.own0 = wgi * kBlock;
  const int tiles = keys.Count();
  auto k_stage = [&](int i) { return ks + (i & 1) * kTile; };
  auto v_stage = [&](int i) { return vs + (i & 1) * kTile; };

  // Commit groups: {Q, K(0)}, then {K(1), V(0)}, then per tile i {K(i + 2), V(i + 1)}.
  {
    const int qb = min(b, p.nb - 1);  // a dead warpgroup (b >= nb) computes on a copy
    auto q_row = [&](int r) {
      return static_cast<size_t>(qb * kBlock + r % kBlock) * p.hq + g * kWgmmaGroup + r / kBlock;
    };
    LoadTile<D>(qs + wgi * kTile, static_cast<const bf16_t*>(p.q), kRows, q_row,
                threadIdx.x % kThreads, kThreads);
  }
  LoadKeyTile<D>(p, keys.Of(0), g, /*is_v=*/false, k_stage(0));
  CpAsyncCommit();
  if (tiles > 1) LoadKeyTile<D>(p, keys.Of(1), g, /*is_v=*/false, k_stage(1));
  LoadKeyTile<D>(p, keys.Of(0), g, /*is_v=*/true, v_stage(0));
  CpAsyncCommit();
  // After S(i) and P V(i - 1): K(i + 1) and V(i) landed and visible to the async proxy; every
  // warp is done with K stage i and V stage i - 1, which take K(i + 2) and V(i + 1).
  auto advance = [&](int i) {
    CpAsyncWait<0>();
    wgmma::FenceProxyAsync();
    __syncthreads();
    if (i + 2 < tiles) LoadKeyTile<D>(p, keys.Of(i + 2), g, /*is_v=*/false, k_stage(i));
    if (i + 1 < tiles) LoadKeyTile<D>(p, keys.Of(i + 1), g, /*is_v=*/true, v_stage(i + 1));
    CpAsyncCommit();
  };

  const float qk_scale = p.scale * kLog2e;
  RowState st;
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float s[kN8][4], pf[kN8][4], alpha[2];
  uint32_t pa[kTk / 16][4];  // P of the tile whose P V is next, as bf16 A fragments

  CpAsyncWait<1>();  // Q, K(0)
  wgmma::FenceProxyAsync();
  __syncthreads();
  const uint32_t q = SmemAddr(qs + wgi * kTile);
  IssueScores<D>(q, SmemAddr(k_stage(0)), s);
  wgmma::Wait<0>();
  wgmma::FenceRegs(s);
  Softmax(mask, keys.Of(0), p, qk_scale, s, st, pf, alpha);  // O is 0: alpha unused
#pragma unroll
  for (int kc = 0; kc < kTk / 16; ++kc) AFromC(pa[kc], pf, kc);
  advance(0);
  for (int i = 1; i < tiles; ++i) {
    IssueScores<D>(q, SmemAddr(k_stage(i)), s);
    wg::IssueRsTile<D>(SmemAddr(v_stage(i - 1)), pa, o);
    wgmma::Wait<1>();  // S(i)
    wgmma::FenceRegs(s);
    Softmax(mask, keys.Of(i), p, qk_scale, s, st, pf, alpha);
    wgmma::Wait<0>();  // P V(i - 1): O and pa are free
    wgmma::FenceRegs(o);
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
#pragma unroll
    for (int kc = 0; kc < kTk / 16; ++kc) AFromC(pa[kc], pf, kc);
    advance(i);
  }
  wg::IssueRsTile<D>(SmemAddr(v_stage(tiles - 1)), pa, o);
  wgmma::Wait<0>();
  wgmma::FenceRegs(o);
  if (b >= p.nb) return;

  bf16_t* out = static_cast<bf16_t*>(p.out);
  const int head = g * kWgmmaGroup + warp;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.0f / l;  // every slot sees at least its own block key: l >= 1
    const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(out + row * D + n * 8 + 2 * tig) =
          __floats2bfloat162_rn(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    if (tig == 0) p.lse[row] = (st.m[h] * qk_scale + log2f(l)) / kLog2e;
  }
}

}  // namespace

cudaError_t LaunchDFlashWgmmaForward(const DFlashKernelParams& p, cudaStream_t stream) {
  if (p.hk <= 0 || !DFlashWgmmaQuerySupported(p.hq / p.hk, p.d) || p.hq != kWgmmaGroup * p.hk ||
      !(p.scale > 0.0f))  // the row max is taken on unscaled scores
    return cudaErrorInvalidValue;
  const size_t smem = DFlashWgmmaForwardSmemBytes(p.d);
  auto launch = [&](auto kernel) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.nb, p.hk), kThreads, smem, stream>>>(p);
    return cudaGetLastError();
  };
  return p.d == 64 ? launch(dflash_wgmma_fwd<64, 1>) : launch(dflash_wgmma_fwd<128, 1>);
}

}  // namespace tandem::kernels::attention_internal
