// Query-major DFlash block attention forward on Hopper warpgroup MMA (wgmma, sm_90a), GQA
// group 4, head_dim 64 or 128. Same contract as dflash_mma_fwd (dflash_mma.cu): out (bf16)
// and lse (f32, natural log) of every (query row, head), each written once by one thread (no
// atomics, a fixed summation order: runs repeat bitwise).
//
// One warpgroup (4 warps) per (block b, KV head g): M = 64 rows = the group's 4 query heads x
// 16 slots of the block, so warp w owns the 16 slots of head 4 g + w. Keys stream in 64-key
// tiles: the block's context range, then its own 16 keys (mma::TileOf). Two blocks per CTA
// sharing one key stream (half the K/V traffic from L2) measured ~1% faster on sorted anchors
// and 2.3x slower on random ones (disjoint ranges make two key segments that both warpgroups
// compute, masked), so a CTA takes one block.
// Q is loaded once per warpgroup into a 128-byte-swizzled tile; K and V stream through two
// 2-stage cp.async rings. Per tile i and warpgroup:
//   S = Q K^T             (wgmma m64n64k16, Q and K K-major from shared memory);
//   online softmax of S   (registers, log2 domain, masks only on edge tiles);
//   O += P V              (wgmma m64nDk16, A = P as bf16 register fragments, B = the V tile
//                          read MN-major through the transpose bit).
// Software pipeline (FlashAttention-3's intra-warpgroup overlap): S(i) and P(i-1) V(i-1) are
// issued back to back, the softmax of S(i) is meant to run while P V is in flight, and O is
// rescaled only after it lands. (The SASS shows ptxas moving the exponentials behind the wait
// for P V and the tile barrier, so the tensor pipe idles through them; issuing S(i + 1) before
// the softmax of S(i) would keep an MMA in flight.) K(i + 2) and V(i + 1) are loaded once one
// barrier per tile proves every warp is past S(i) and P(i-1) V(i-1), so each load has a whole
// tile of math to land.
// ptxas-visible rules against wgmma serialization: every MMA runs on every tile (masks zero
// what a slot does not see; no MMA under a branch), the first k-step of S only writes its
// accumulators, and P lives in registers of its own, never in S's.
#include "kernels/attention/dflash_wgmma_internal.h"
#include "kernels/attention/dflash_wgmma_tiles.cuh"
#include "kernels/core/wgmma.cuh"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers
using wg::LoadKeyTile;
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

template <int D>
__global__ void __launch_bounds__(kThreads, 2) dflash_wgmma_fwd(Params p) {
  constexpr int kTile = kTk * D * 2;  // bytes of a 64-row SW128 tile
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* qs = base;            // [64 rows][D], row h * 16 + slot = (slot, head 4 g + h)
  uint8_t* ks = base + kTile;    // K of tile i at ks + (i % 2) kTile
  uint8_t* vs = ks + 2 * kTile;  // V of tile i at vs + (i % 2) kTile
  const int b = blockIdx.x, g = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const Mask mask = wg::UniformMask(p, b);
  const int ctx_tiles = (mask.hi - mask.lo + kTk - 1) / kTk, tiles = ctx_tiles + 1;
  auto tile_of = [&](int i) { return TileOf(i, ctx_tiles, mask.lo, mask.hi, b); };
  auto k_stage = [&](int i) { return ks + (i & 1) * kTile; };
  auto v_stage = [&](int i) { return vs + (i & 1) * kTile; };

  // Commit groups: {Q, K(0)}, then {K(1), V(0)}, then per tile i {K(i + 2), V(i + 1)}.
  wg::LoadQueryTile<D>(p, p.q, b, g, qs);
  LoadKeyTile<D>(p, tile_of(0), g, /*is_v=*/false, k_stage(0));
  CpAsyncCommit();
  if (tiles > 1) LoadKeyTile<D>(p, tile_of(1), g, /*is_v=*/false, k_stage(1));
  LoadKeyTile<D>(p, tile_of(0), g, /*is_v=*/true, v_stage(0));
  CpAsyncCommit();
  // After S(i) and P V(i - 1): K(i + 1) and V(i) landed and visible to the async proxy; every
  // warp is done with K stage i and V stage i - 1, which take K(i + 2) and V(i + 1).
  auto advance = [&](int i) {
    CpAsyncWait<0>();
    wgmma::FenceProxyAsync();
    __syncthreads();
    if (i + 2 < tiles) LoadKeyTile<D>(p, tile_of(i + 2), g, /*is_v=*/false, k_stage(i));
    if (i + 1 < tiles) LoadKeyTile<D>(p, tile_of(i + 1), g, /*is_v=*/true, v_stage(i + 1));
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
  const uint32_t q = SmemAddr(qs);
  IssueScores<D>(q, SmemAddr(k_stage(0)), s);
  wgmma::Wait<0>();
  wgmma::FenceRegs(s);
  Softmax(mask, tile_of(0), p, qk_scale, s, st, pf, alpha);  // O is 0: alpha unused
#pragma unroll
  for (int kc = 0; kc < kTk / 16; ++kc) AFromC(pa[kc], pf, kc);
  advance(0);
  for (int i = 1; i < tiles; ++i) {
    IssueScores<D>(q, SmemAddr(k_stage(i)), s);
    wg::IssueRsTile<D>(SmemAddr(v_stage(i - 1)), pa, o);
    wgmma::Wait<1>();  // S(i)
    wgmma::FenceRegs(s);
    Softmax(mask, tile_of(i), p, qk_scale, s, st, pf, alpha);
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
  return p.d == 64 ? launch(dflash_wgmma_fwd<64>) : launch(dflash_wgmma_fwd<128>);
}

}  // namespace tandem::kernels::attention_internal
