// Query-major DFlash block attention backward on Hopper warpgroup MMA (wgmma, sm_90a): the
// split backward's dQ, the block's own dK/dV and delta = rowsum(dO O), for GQA group 4.
// Same contract as dflash_mma_bwd<D, kSplit = true> (dflash_mma_bwd.cu); the context keys'
// dK/dV stay with the key-major kernel there.
//
// One warpgroup (4 warps) per (block b, KV head g); M = 64 rows = the group's 4 query heads x
// 16 slots, so warp w owns the 16 slots of head 4 g + w, as the mma.sync kernel's warp w does.
// Q and dO are loaded once, K and V stream in 64-key tiles (the block's context range, then
// its own 16 keys) through a 2-stage cp.async ring of 128-byte-swizzled tiles
// (kernels/core/wgmma.cuh), the next tile's load overlapping this tile's math. Per tile:
//   S = Q K^T, dP = dO V^T    (wgmma m64n64k16, both operands from shared memory, K-major);
//   P = exp(S - lse) on the visible keys, dS = P (dP - delta)   (registers);
//   dQ += dS K                 (wgmma m64nDk16, A = dS as bf16 register fragments, B = the K
//                               tile read MN-major through the transpose bit).
// On the block's own tile P and dS also go to shared memory and the warps share dV = P^T dO
// and dK = scale dS^T Q of its 16 keys with mma.sync, in 16-key x 64-dim units, as the
// mma.sync kernel does. No atomics: every output element is written once, so runs repeat
// bitwise.
#include "kernels/attention/dflash_mma_device.cuh"
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
constexpr int kPb = kBlock + 8;          // row stride (elements) of the block tile's P / dS
static_assert(kTk == 64 && kRows == 64, "the tiles are 64 x D");

// K and V rows of tile t, by the whole CTA.
template <int D>
__device__ inline void LoadKvTile(const Params& p, const Tile& t, int g, uint8_t* ks, uint8_t* vs) {
  LoadKeyTile<D>(p, t, g, /*is_v=*/false, ks);
  LoadKeyTile<D>(p, t, g, /*is_v=*/true, vs);
}

// dV (is_dk false) or dK of the block's own 16 keys from its P / dS in shared memory (rows
// by query row, [kRows][kPb]) and dO / Q (SW128): units of 64 dims shared among the warps of
// the block's warpgroup.
template <int D>
__device__ inline void BlockKeyGrads(const Params& p, const Tile& t, int g, const bf16_t* ps,
                                     const bf16_t* dss, const uint8_t* qs, const uint8_t* dos) {
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x % kThreads / 32, 0);  // uniform
  const int lane = threadIdx.x % 32, gid = lane / 4;
  const int tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8;
  for (int u = warp; u < 2 * (D / 64); u += kThreads / 32) {
    const bool is_dk = u % 2 == 1;
    const int dc = u / 2;
    const bf16_t* as = is_dk ? dss : ps;
    const uint8_t* bs = is_dk ? qs : dos;
    float acc[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
    for (int kr = 0; kr < kWgmmaGroup; ++kr) {
      uint32_t a[4];
      Ldsm4T(a, as + (kr * 16 + (mi >> 1) * 8 + r8) * kPb + (mi & 1) * 8);
      const int row = kr * 16 + (mi & 1) * 8 + r8;
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t r[4];
        Ldsm4T(r, bs + wgmma::Sw128(kRows, row, dc * 64 + np * 16 + (mi >> 1) * 8));
        Mma(acc[2 * np], a, r[0], r[1]);
        Mma(acc[2 * np + 1], a, r[2], r[3]);
      }
    }
    const float f = is_dk ? p.scale : 1.0f;
    bf16_t* dst = static_cast<bf16_t*>(is_dk ? p.dkb : p.dvb);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const size_t row = static_cast<size_t>(t.first + gid + 8 * h) * p.hk + g;
#pragma unroll
      for (int n = 0; n < 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(dst + row * D + dc * 64 + n * 8 + 2 * tig) =
            __floats2bfloat162_rn(acc[n][2 * h] * f, acc[n][2 * h + 1] * f);
    }
  }
}

// S = Q K^T and dP = dO V^T of one tile, committed as two groups (S first).
template <int D>
__device__ inline void IssueScores(uint32_t qs, uint32_t dos, uint32_t ks, uint32_t vs,
                                   float (&s)[kTk / 8][4], float (&dp)[kTk / 8][4]) {
  constexpr uint32_t kPanel = kTk * 128;
  wgmma::Fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t off = (kk / 4) * kPanel + (kk % 4) * 32;
    wgmma::MmaSS64(s, wgmma::Desc(qs + off, 16, 1024), wgmma::Desc(ks + off, 16, 1024), kk > 0);
  }
  wgmma::Commit();
  wgmma::Fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t off = (kk / 4) * kPanel + (kk % 4) * 32;
    wgmma::MmaSS64(dp, wgmma::Desc(dos + off, 16, 1024), wgmma::Desc(vs + off, 16, 1024), kk > 0);
  }
  wgmma::Commit();
}


// P and dS of one tile from S (s) and dP (dp); P masked to the visible keys.
template <int D>
__device__ inline void Softmax(const Mask& m, const Tile& t, const Params& p, int floor,
                               const float (&lse2)[2], const float (&delta)[2],
                               float (&s)[kTk / 8][4], float (&dp)[kTk / 8][4],
                               float (&pr)[kTk / 8][4], float (&ds)[kTk / 8][4]) {
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const float qk_scale = p.scale * kLog2e;
  wgmma::Wait<0>();
  wgmma::FenceRegs(s);
  const float nl[2] = {-lse2[0], -lse2[1]};
  if (m.Full(t, floor)) {
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) pr[n][e] = Exp2(fmaf(s[n][e], qk_scale, nl[e >> 1]));
  } else {
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n * 8 + 2 * tig + (e & 1), half = e >> 1;
        pr[n][e] = m.Visible(t, p.causal, floor, key, gid + 8 * half)
                       ? Exp2(fmaf(s[n][e], qk_scale, nl[half]))
                       : 0.0f;
      }
  }
  wgmma::Wait<0>();
  wgmma::FenceRegs(dp);
#pragma unroll
  for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) ds[n][e] = pr[n][e] * (dp[n][e] - delta[e >> 1]);
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2) dflash_wgmma_bwd(Params p) {
  constexpr int kTile = kTk * D * 2;  // bytes of a 64-row SW128 tile
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* qs = base;              // [64 rows][D], row h * 16 + slot = (slot, head 4 g + h)
  uint8_t* dos = base + kTile;     // same rows
  uint8_t* kv = base + 2 * kTile;  // stage st: K at kv + 2 st kTile, V after it
  bf16_t* ps = reinterpret_cast<bf16_t*>(base + 6 * kTile);  // [kRows][kPb], own keys' P
  bf16_t* dss = ps + kRows * kPb;                            // [kRows][kPb], own keys' dS
  const int b = blockIdx.x, g = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const Mask mask = wg::UniformMask(p, b);
  const int ctx_tiles = (mask.hi - mask.lo + kTk - 1) / kTk, tiles = ctx_tiles + 1;
  auto tile_of = [&](int it) { return TileOf(it, ctx_tiles, mask.lo, mask.hi, b); };
  const bf16_t* dout = static_cast<const bf16_t*>(p.dout);

  wg::LoadQueryTile<D>(p, p.q, b, g, qs);
  wg::LoadQueryTile<D>(p, dout, b, g, dos);
  LoadKvTile<D>(p, tile_of(0), g, kv, kv + kTile);
  CpAsyncCommit();

  // Per row (gid, gid + 8 of this warp's head): lse in log2 units and rowsum(dO * O).
  const int head = g * kWgmmaGroup + warp;
  float lse2[2], delta[2];
  RowStats<D>(p, b, head, /*store_delta=*/true, lse2, delta);
  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  const uint32_t qa = SmemAddr(qs), doa = SmemAddr(dos);

  // Tile i is in stage i % 2. S and dP of tile i + 1 are issued before waiting for dQ of tile
  // i, so the tensor pipe runs dQ(i), S(i + 1), dP(i + 1) back to back. Every tile runs every
  // MMA (masks zero what a slot does not see): wgmma under a branch is serialized by ptxas.
  float s[kTk / 8][4], dp[kTk / 8][4];
  auto issue_scores = [&](int i) {
    const uint32_t ka = SmemAddr(kv + 2 * (i & 1) * kTile);
    IssueScores<D>(qa, doa, ka, ka + kTile, s, dp);
  };
  auto tile_landed = [&] {
    CpAsyncWait<0>();
    wgmma::FenceProxyAsync();
    __syncthreads();
  };
  tile_landed();
  if (tiles > 1) LoadKvTile<D>(p, tile_of(1), g, kv + 2 * kTile, kv + 3 * kTile);
  CpAsyncCommit();
  issue_scores(0);
  for (int it = 0; it < tiles; ++it) {
    const int st = it & 1;
    const Tile t = tile_of(it);
    float pr[kTk / 8][4], ds[kTk / 8][4];
    Softmax<D>(mask, t, p, mask.Floor(t, p.window), lse2, delta, s, dp, pr, ds);
    uint32_t a[kTk / 16][4];
#pragma unroll
    for (int kc = 0; kc < kTk / 16; ++kc) AFromC(a[kc], ds, kc);
    wg::IssueRsTile<D>(SmemAddr(kv + 2 * st * kTile), a, dq);
    if (t.blk) {
      // P and dS of the block's 16 keys, rows warp * 16 + gid (+ 8), for BlockKeyGrads.
#pragma unroll
      for (int n = 0; n < kBlock / 8; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int off = (warp * 16 + gid + 8 * h) * kPb + n * 8 + 2 * tig;
          *reinterpret_cast<uint32_t*>(ps + off) = Pack(pr[n][2 * h], pr[n][2 * h + 1]);
          *reinterpret_cast<uint32_t*>(dss + off) = Pack(ds[n][2 * h], ds[n][2 * h + 1]);
        }
    }
    if (it + 1 < tiles) {
      tile_landed();
      issue_scores(it + 1);
      wgmma::Wait<2>();
    } else {
      wgmma::Wait<0>();
    }
    wgmma::FenceRegs(dq);
    __syncthreads();  // every warp's dQ(it) is done: stage st is free; P / dS visible
    if (it + 2 < tiles)
      LoadKvTile<D>(p, tile_of(it + 2), g, kv + 2 * st * kTile, kv + (2 * st + 1) * kTile);
    CpAsyncCommit();
    if (t.blk) BlockKeyGrads<D>(p, t, g, ps, dss, qs, dos);
  }
  StoreQueryRows<D>(p.dq, p, b, head, dq, p.scale);
}

}  // namespace

cudaError_t LaunchDFlashWgmmaQueryBackward(const DFlashKernelParams& p, cudaStream_t stream) {
  if (!DFlashWgmmaQuerySupported(p.hk > 0 ? p.hq / p.hk : 0, p.d) || p.hq != kWgmmaGroup * p.hk ||
      p.delta == nullptr)
    return cudaErrorInvalidValue;
  const size_t smem = DFlashWgmmaQuerySmemBytes(p.d);
  auto launch = [&](auto kernel) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.nb, p.hk), kThreads, smem, stream>>>(p);
    return cudaGetLastError();
  };
  return p.d == 64 ? launch(dflash_wgmma_bwd<64>) : launch(dflash_wgmma_bwd<128>);
}

}  // namespace tandem::kernels::attention_internal
