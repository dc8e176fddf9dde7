// DFlash split backward, key-major context kernel on Hopper warpgroup MMA (wgmma, sm_90a):
// dK / dV of the context keys, d = 128. Same contract as dflash_mma_bwd_ctx (the mma.sync
// kernel, which keeps d = 64): every context row of dkc / dvc written once, by one thread, after
// a fixed-order sum over the blocks that see it (deterministic, no atomics).
//
// CTA (128-key tile kt, KV head g), two warpgroups; warpgroup j owns keys 64 j .. 64 j + 63 of
// the tile (wgmma's M = 64), and they share one stream of query items: the blocks whose range
// [lo, anchor) meets the tile, in block order, each as (up to) 4 query heads of g x 16 slots =
// 64 query rows. 128 keys per CTA halve the L2 -> SM traffic of Q / dO against 64 keys per CTA,
// where that traffic bounded a wgmma version of this kernel. Per item each warpgroup
//   S^T = K Q^T, dP^T = V dO^T      (m64n64k16, both operands K-major in shared memory),
//   P^T = exp(S^T - lse) on the keys each row sees, dS^T = P^T (dP^T - delta)   (registers),
//   dV += P^T dO, dK += dS^T Q      (m64n128k16, A = P^T / dS^T from registers as bf16,
//                                    B = dO / Q MN-major through the transpose bit),
// with dK / dV in registers for the whole kernel. K / V (resident) and Q / dO sit in
// 128-byte-swizzled tiles (kernels/core/wgmma.cuh), Q / dO, lse and delta (from the query-major
// kernel) in 3 stages: item i + 2 is loaded (cp.async, all threads) into the stage of item
// i - 1 right after item i's first MMAs are issued. While one warpgroup forms P^T / dS^T, the
// other's MMAs keep the tensor cores busy.
#include <climits>

#include "kernels/attention/dflash_mma_device.cuh"
#include "kernels/core/wgmma.cuh"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers

constexpr int kD = 128;
constexpr int kWgKeys = 64;                    // keys per warpgroup (wgmma M)
constexpr int kWgs = kWgmmaCtxKeys / kWgKeys;  // warpgroups per CTA
constexpr int kThreads = 128 * kWgs;
constexpr int kRows = 16 * kCtxHeads;  // query rows per item
constexpr int kStages = kWgmmaCtxStages;
constexpr int kChunks = kD / 8;  // 16-byte chunks per row

// Shared memory, from a 1024-byte-aligned base: K, V as [kWgs][64 keys][128] swizzled tiles;
// per stage Q, dO [64 rows][128] swizzled, then lse (log base e) and delta [kStages][64]; the
// block list; the per-warp counts of the list compaction.
constexpr uint32_t kWgTileBytes = kWgKeys * kD * 2;
constexpr uint32_t kRowsBytes = kRows * kD * 2;
constexpr uint32_t kKOff = 0, kVOff = kWgs * kWgTileBytes;
constexpr uint32_t kStageOff = 2 * kWgs * kWgTileBytes, kStageBytes = 2 * kRowsBytes;
constexpr uint32_t kLseOff = kStageOff + kStages * kStageBytes;
constexpr uint32_t kDeltaOff = kLseOff + kStages * kRows * 4;
constexpr uint32_t kListOff = kDeltaOff + kStages * kRows * 4;
constexpr uint32_t kRangeOff = kListOff + kCtxListCap * 4;  // (lo, hi) per list entry
constexpr uint32_t kCountOff = kRangeOff + kCtxListCap * 8;
constexpr uint32_t kEnd = kCountOff + 4 * (kThreads / 32);
static_assert(kEnd + 1024 <= DFlashWgmmaCtxSmemBytes(), "smem layout vs the launcher's budget");
static_assert(kRows == 64 && kWgs * kWgKeys == kWgmmaCtxKeys);

// Loads item i (block list[i / chunks], heads g G + h0 ..) into stage st: Q and dO rows
// w * 16 + slot (zero for heads past the group), lse and delta of those rows.
__device__ inline void LoadItem(const Params& p, const int* list, int i, int chunks, int g,
                                uint8_t* base, int st) {
  const int group = p.hq / p.hk, b = list[i / chunks], h0 = (i % chunks) * kCtxHeads;
  const int heads = min(kCtxHeads, group - h0), head0 = g * group + h0;
  uint8_t* qs = base + kStageOff + st * kStageBytes;
  const bf16_t* q = static_cast<const bf16_t*>(p.q);
  const bf16_t* dout = static_cast<const bf16_t*>(p.dout);
  for (int e = threadIdx.x; e < kRows * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks, w = r / kBlock, slot = r % kBlock;
    const bool valid = w < heads;
    const size_t off =
        (static_cast<size_t>(b * kBlock + slot) * p.hq + head0 + (valid ? w : 0)) * kD + c * 8;
    const uint32_t dst = wgmma::Sw128Chunk(kRows, r, c);
    CpAsync16(qs + dst, q + off, valid);
    CpAsync16(qs + kRowsBytes + dst, dout + off, valid);
  }
  if (threadIdx.x < 2 * kRows) {
    const int r = threadIdx.x % kRows, w = r / kBlock, slot = r % kBlock;
    const bool valid = w < heads, is_delta = threadIdx.x >= kRows;
    const size_t row = static_cast<size_t>(b * kBlock + slot) * p.hq + head0 + (valid ? w : 0);
    float* dst = reinterpret_cast<float*>(base + (is_delta ? kDeltaOff : kLseOff)) + st * kRows + r;
    ptx::CpAsync4(dst, (is_delta ? p.delta : p.lse_in) + row, valid);
  }
}

// Appends to list, in block order, the blocks from `start` on whose context range meets keys
// [k0, k1), and their ranges to `range`, until the list would overflow; returns the count and
// advances start.
__device__ inline int CompactBlocks(const Params& p, int k0, int k1, int* list, int2* range,
                                    int* warp_count, int* start) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int count = 0;
  for (; *start < p.nb && count + kThreads <= kCtxListCap; *start += kThreads) {
    const int b = *start + threadIdx.x;
    bool sees = false;
    int lo = 0, hi = 0;
    if (b < p.nb) {
      ContextRange(p, b, &lo, &hi);
      sees = lo < k1 && hi > k0;
    }
    const unsigned mask = __ballot_sync(0xffffffffu, sees);
    if (lane == 0) warp_count[warp] = __popc(mask);
    __syncthreads();
    int off = count, total = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      off += w < warp ? warp_count[w] : 0;
      total += warp_count[w];
    }
    if (sees) {
      const int at = off + __popc(mask & ((1u << lane) - 1u));
      list[at] = b;
      range[at] = make_int2(lo, hi);
    }
    count += total;
    __syncthreads();  // warp_count reused; the list is visible
  }
  return count;
}

// Issues one item's S^T = K Q^T and dP^T = V dO^T for this warpgroup (one commit group); s
// and dp need no initial value.
__device__ inline void IssueScores(uint32_t k_wg, uint32_t v_wg, uint32_t q_st, float (&s)[8][4],
                                   float (&dp)[8][4]) {
  const uint32_t do_st = q_st + kRowsBytes;
  wgmma::Fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t off = (kk / 4) * (kRows * 128) + (kk % 4) * 32;
    const uint32_t koff = (kk / 4) * (kWgKeys * 128) + (kk % 4) * 32;
    const uint64_t a = wgmma::Desc(k_wg + koff, 16, 1024), b = wgmma::Desc(q_st + off, 16, 1024);
    if (kk == 0)
      wgmma::MmaSS64<false>(s, a, b);
    else
      wgmma::MmaSS64<true>(s, a, b);
  }
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t off = (kk / 4) * (kRows * 128) + (kk % 4) * 32;
    const uint32_t koff = (kk / 4) * (kWgKeys * 128) + (kk % 4) * 32;
    const uint64_t a = wgmma::Desc(v_wg + koff, 16, 1024), b = wgmma::Desc(do_st + off, 16, 1024);
    if (kk == 0)
      wgmma::MmaSS64<false>(dp, a, b);
    else
      wgmma::MmaSS64<true>(dp, a, b);
  }
  wgmma::Commit();
}

// Finishes the item IssueScores started: waits for S^T / dP^T, forms P^T and dS^T in
// registers, and issues dV += P^T dO, dK += dS^T Q (one commit group; the caller waits). `heads`
// valid query heads; lim0 / lim1 the last slot that sees key key_lo (+ 8), -1 for none.
__device__ inline void FinishItem(uint32_t q_st, const float* lse, const float* delta,
                                  float qk_scale, int heads, int lim0, int lim1, float (&s)[8][4],
                                  float (&dp)[8][4], float (&dk)[16][4], float (&dv)[16][4]) {
  const int tig = threadIdx.x % 4;
  const uint32_t do_st = q_st + kRowsBytes;
  wgmma::Wait<0>();
  wgmma::FenceRegs(s);
  wgmma::FenceRegs(dp);
  // Column (query row) 8 n + 2 tig + (e & 1): head n / 2, slot 8 (n % 2) + 2 tig + (e & 1).
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = n * 8 + 2 * tig + (e & 1), slot = col % kBlock;
      const bool see = n / 2 < heads && slot <= ((e >> 1) ? lim1 : lim0);
      const float pr = see ? exp2f(fmaf(s[n][e], qk_scale, -lse[col] * kLog2e)) : 0.0f;
      s[n][e] = pr;
      dp[n][e] = pr * (dp[n][e] - delta[col]);
    }
  uint32_t pa[4][4], sa[4][4];
#pragma unroll
  for (int kc = 0; kc < 4; ++kc) {
    AFromC(pa[kc], s, kc);
    AFromC(sa[kc], dp, kc);
  }
  wgmma::Fence();
#pragma unroll
  for (int kc = 0; kc < 4; ++kc)
    wgmma::MmaRSTransB<128>(dv, pa[kc], wgmma::Desc(do_st + kc * 16 * 128, kRows * 128, 1024));
#pragma unroll
  for (int kc = 0; kc < 4; ++kc)
    wgmma::MmaRSTransB<128>(dk, sa[kc], wgmma::Desc(q_st + kc * 16 * 128, kRows * 128, 1024));
  wgmma::Commit();
}

// Tiles ordered longest first: CTAs start in blockIdx order, so the CTA of linear index j
// takes the tile of rank j / hk (by the number of blocks whose range meets it, ties by index)
// and head j % hk, which keeps the longest tiles out of the last wave (a greedy
// longest-first schedule). Every CTA counts and ranks the tiles itself (a difference array
// over the blocks' ranges, then a scan), in `scratch` (>= 2 * tiles + 1 ints). The order only
// decides when a tile runs, not what it computes.
__device__ inline void RankedTile(const Params& p, int tiles, int* scratch, int* kt, int* g) {
  const int j = blockIdx.y * gridDim.x + blockIdx.x;
  *kt = j / p.hk;
  *g = j % p.hk;
  int* cnt = scratch;                // [tiles + 1]
  int* order = scratch + tiles + 1;  // [tiles]
  for (int u = threadIdx.x; u <= tiles; u += kThreads) cnt[u] = 0;
  __syncthreads();
  for (int b = threadIdx.x; b < p.nb; b += kThreads) {
    int lo, hi;
    ContextRange(p, b, &lo, &hi);
    if (lo >= hi) continue;
    atomicAdd(&cnt[lo / kWgmmaCtxKeys], 1);
    atomicAdd(&cnt[(hi - 1) / kWgmmaCtxKeys + 1], -1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // inclusive scan by one warp: lane l sums a run of `per` tiles
    const int lane = threadIdx.x, per = (tiles + 31) / 32, u0 = lane * per;
    int run = 0;
    for (int u = u0; u < min(u0 + per, tiles); ++u) run += cnt[u];
    int incl = run;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    int acc = incl - run;
    for (int u = u0; u < min(u0 + per, tiles); ++u) cnt[u] = acc += cnt[u];
  }
  __syncthreads();
  for (int u = threadIdx.x; u < tiles; u += kThreads) {
    int rank = 0;
    for (int v = 0; v < tiles; ++v) rank += cnt[v] > cnt[u] || (cnt[v] == cnt[u] && v < u);
    order[rank] = u;
  }
  __syncthreads();
  *kt = order[*kt];
  __syncthreads();  // scratch is the block list's, reused next
}

template <bool kRanked>
__global__ void __launch_bounds__(kThreads, 1) dflash_wgmma_ctx(Params p) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = smem_raw + ((1024u - (SmemAddr(smem_raw) & 1023u)) & 1023u);
  const uint32_t sbase = SmemAddr(base);
  int* list = reinterpret_cast<int*>(base + kListOff);
  int2* range = reinterpret_cast<int2*>(base + kRangeOff);
  int* warp_count = reinterpret_cast<int*>(base + kCountOff);

  int kt = blockIdx.x, g = blockIdx.y;
  if (kRanked) RankedTile(p, gridDim.x, list, &kt, &g);
  const int group = p.hq / p.hk, chunks = (group + kCtxHeads - 1) / kCtxHeads;
  const int k0 = kt * kWgmmaCtxKeys, k1 = min(k0 + kWgmmaCtxKeys, p.t);
  const int wgi = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, gid = (threadIdx.x % 32) / 4;
  const int wk0 = k0 + wgi * kWgKeys;        // this warpgroup's first key
  const int key_lo = wk0 + warp * 16 + gid;  // keys key_lo and key_lo + 8 of this lane

  // This tile's K and V rows (zero past t), resident for the whole kernel.
  const bf16_t *kc = static_cast<const bf16_t*>(p.kc), *vc = static_cast<const bf16_t*>(p.vc);
  for (int e = threadIdx.x; e < kWgmmaCtxKeys * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks, key = k0 + r;
    const bool valid = key < k1;
    const size_t off = (static_cast<size_t>(valid ? key : 0) * p.hk + g) * kD + c * 8;
    const uint32_t dst = (r / kWgKeys) * kWgTileBytes + wgmma::Sw128Chunk(kWgKeys, r % kWgKeys, c);
    CpAsync16(base + kKOff + dst, kc + off, valid);
    CpAsync16(base + kVOff + dst, vc + off, valid);
  }
  CpAsyncCommit();

  float dk[16][4], dv[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  const float qk_scale = p.scale * kLog2e;
  const uint32_t k_wg = sbase + kKOff + wgi * kWgTileBytes;
  const uint32_t v_wg = sbase + kVOff + wgi * kWgTileBytes;

  for (int start = 0; start < p.nb;) {
    const int items = CompactBlocks(p, k0, k1, list, range, warp_count, &start) * chunks;
    for (int j = 0; j < kStages - 1; ++j) {
      if (j < items) LoadItem(p, list, j, chunks, g, base, j);
      CpAsyncCommit();
    }
    for (int i = 0; i < items; ++i) {
      CpAsyncWait<kStages - 2>();
      wgmma::FenceProxyAsync();
      __syncthreads();  // item i landed for every thread; item i - 1's stage is consumed
      const int lo = range[i / chunks].x, hi = range[i / chunks].y, st = i % kStages;
      const uint32_t q_st = sbase + kStageOff + st * kStageBytes;
      const bool active = lo < wk0 + kWgKeys && hi > wk0;  // some key of this warpgroup is seen
      if (active) {
        float s[8][4], dp[8][4];
        IssueScores(k_wg, v_wg, q_st, s, dp);
        // Row slot sees key iff the key is in [lo, hi) and slot <= key - WindowFloor(hi, W).
        const int floor = WindowFloor(hi, p.window);
        auto lim_of = [&](int key) {
          if (key < lo || key >= hi) return -1;
          return floor == INT_MIN ? kBlock : min(kBlock, key - floor);
        };
        const int heads = min(kCtxHeads, group - (i % chunks) * kCtxHeads);
        const float* lse = reinterpret_cast<const float*>(base + kLseOff) + st * kRows;
        const float* delta = reinterpret_cast<const float*>(base + kDeltaOff) + st * kRows;
        FinishItem(q_st, lse, delta, qk_scale, heads, lim_of(key_lo), lim_of(key_lo + 8), s, dp, dk,
                   dv);
      }
      // Item i + 2 into the stage of item i - 1, while this item's dV / dK MMAs run (issued
      // here, not before S^T / dP^T: there the address math would crowd the registers those
      // hold and ptxas would serialize the MMAs).
      if (i + kStages - 1 < items)
        LoadItem(p, list, i + kStages - 1, chunks, g, base, (i + kStages - 1) % kStages);
      CpAsyncCommit();
      // The stage is reloaded after the next barrier. Waiting here (not an item later) also
      // frees P^T / dS^T's registers before the next S^T / dP^T: no room for both.
      wgmma::Wait<0>();
    }
    wgmma::Wait<0>();
    CpAsyncWait<0>();
    __syncthreads();  // stages and the list are reused only after every warp is done with them
  }
  wgmma::Wait<0>();
  wgmma::FenceRegs(dk);
  wgmma::FenceRegs(dv);

  const int tig = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key_lo + 8 * h;
    if (key >= k1) continue;
    const size_t row = (static_cast<size_t>(key) * p.hk + g) * kD;
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      *reinterpret_cast<float2*>(p.dkc + row + n * 8 + 2 * tig) =
          make_float2(dk[n][2 * h] * p.scale, dk[n][2 * h + 1] * p.scale);
      *reinterpret_cast<float2*>(p.dvc + row + n * 8 + 2 * tig) =
          make_float2(dv[n][2 * h], dv[n][2 * h + 1]);
    }
  }
}

}  // namespace

cudaError_t LaunchDFlashWgmmaCtx(const DFlashKernelParams& p, cudaStream_t stream) {
  if (p.d != kD || p.hq % p.hk != 0) return cudaErrorInvalidValue;
  const size_t smem = DFlashWgmmaCtxSmemBytes();
  const int tiles = (p.t + kWgmmaCtxKeys - 1) / kWgmmaCtxKeys;
  auto kernel = DFlashWgmmaCtxRanked(p.t) ? dflash_wgmma_ctx<true> : dflash_wgmma_ctx<false>;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  kernel<<<dim3(tiles, p.hk), kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::attention_internal
