// DFlash block attention forward on tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate); same contract as the SIMT kernel in dflash_attention.cu.
//
// Work split. An m-tile is the 16 query slots of one (block, query head). One CTA takes NBC
// consecutive blocks x the G = hq / hk query heads of KV head g: mt = NBC * G <= 8 m-tiles
// (NBC = max(1, 8 / G)), numbered block-major (m-tile i = block b0 + i / G, head g * G + i % G),
// and ceil(mt / 2) warps; warp w owns m-tiles 2w and 2w + 1, so every K or V fragment it
// reads from shared memory feeds two MMAs (for even G both m-tiles share one block and mask).
//
// Keys. The CTA's blocks share one key stream, so their K/V rows are loaded once: context
// tiles of up to 64 keys, each starting at the lowest key >= the previous tile's end that lies
// in some block's range [lo_b, anchor_b), the union of its slots' ranges (gaps between ranges
// are skipped, so any anchor order is correct; sorted anchors, as the drafter's plan makes
// them, give ranges that nearly coincide), then tiles of the blocks' own keys (4 blocks x 16
// keys each). Every m-tile masks each key by its own block's range (context) or block (own
// keys), and per slot by the window (slot i at position anchor + i sees keys at positions
// >= anchor + i - (W - 1)) and, on its own keys, causality when asked; a warp skips a tile in
// which neither of its m-tiles sees a key.
//
// Pipeline: Q of all m-tiles stays in shared memory (two m-tiles of Q fragments would not fit
// in registers beside two O accumulators); K/V tiles are double buffered with cp.async and one
// __syncthreads per tile (the load of tile it + 1 is issued after the barrier that proves every
// warp is done with tile it - 1, which used the same stage). A warp works through a tile in
// 32-key steps (S, online softmax in the log2 domain, O += P V with P re-packed from the S
// accumulators), which keeps d = 128 at 255 registers without spills; steps in which neither
// of its m-tiles sees a key are skipped.
#include <algorithm>
#include <climits>

#include "kernels/attention/dflash_mma_device.cuh"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers

constexpr int kCtaMtiles = 8;                 // m-tiles per CTA at most (4 warps)
constexpr int kMaxNbc = kCtaMtiles;           // blocks per CTA at most (G == 1)
constexpr int kBlocksPerTile = kTk / kBlock;  // blocks whose own keys share one key tile
constexpr int kSub = 32;                      // keys per S / softmax / P V step (registers)

__device__ inline void LdsmAt(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void LdsmTAt(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Dynamic shared memory: Q of mt m-tiles, then 2 stages x (K, V) tiles of kTk rows.
constexpr size_t FwdSmemBytes(int mt, int d) {
  return static_cast<size_t>(kBlock * mt + 4 * kTk) * (d + 8) * 2;
}

// The CTA's key stream: context tiles covering the union of the blocks' ranges, then the
// blocks' own keys. Every thread runs the same schedule on the shared ranges.
struct KeySchedule {
  const int *lo, *hi;  // [nv] context range of block b0 + j (shared memory)
  int nv, b0, max_hi;
  int pos = INT_MIN, next_blk = 0;  // next context key to cover; next own-key tile

  __device__ bool Next(Tile* t) {
    int s = INT_MAX;
    for (int j = 0; j < nv; ++j) {
      const int from = max(pos, lo[j]);
      if (from < hi[j]) s = min(s, from);
    }
    if (s != INT_MAX) {
      *t = {false, s, min(kTk, max_hi - s)};
      pos = s + kTk;
      return true;
    }
    if (next_blk * kBlocksPerTile >= nv) return false;
    const int first = next_blk * kBlocksPerTile;
    *t = {true, (b0 + first) * kBlock, kBlock * min(kBlocksPerTile, nv - first)};
    ++next_blk;
    return true;
  }
};

// Keys [vlo, vhi) of a tile that some slot of one m-tile sees (the union over its slots:
// the steps and tiles outside it are skipped); slot i sees key k of it only if also
// k - i >= floor (the window per query position: FloorOf below) and, with `causal` (its
// own 16 keys, causal in the block), k - vlo <= i: slot i sees [max(vlo, floor + i),
// causal ? min(vhi, vlo + i + 1) : vhi). The floor is derived where it is used, not kept
// here: one more live register per m-tile makes the d = 128 kernel spill.
struct Span {
  int vlo, vhi;
  bool causal;
  __device__ bool Meets(int k0) const { return vlo < k0 + kSub && vhi > k0 && vhi > vlo; }
};
__device__ inline Span SpanOf(const Tile& t, int rel, int lo, int hi, int tile_blk0, bool causal) {
  if (!t.blk) return {max(lo - t.first, 0), min(hi - t.first, t.n), false};
  const int c = rel - tile_blk0;
  if (c < 0 || c >= kBlocksPerTile) return {0, 0, false};
  return {c * kBlock, c * kBlock + kBlock, causal};
}
// The window floor (dflash_internal.h, WindowFloor) of a span of tile t for a block
// anchored at hi: the anchor's index in the tile's key space is hi - t.first for context
// keys and the span's first key for the block's own keys.
__device__ inline int FloorOf(const Tile& t, const Span& s, int hi, int window) {
  return WindowFloor(t.blk ? s.vlo : hi - t.first, window);
}

// Async-loads the 16 query rows of each of the mt m-tiles into [16 mt][D + 8]; m-tiles of
// blocks >= nb are zero-filled (dead: computed alongside a live m-tile, never written).
template <int D>
__device__ inline void LoadQ(const bf16_t* q, const Params& p, int b0, int g, int group, int mt,
                             bf16_t* qs) {
  constexpr int kChunks = D / 8, kStride = D + 8;
  for (int e = threadIdx.x; e < kBlock * mt * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = (e % kChunks) * 8;
    const int i = r / kBlock, slot = r % kBlock, b = b0 + i / group;
    const bool valid = b < p.nb;
    const size_t tok = static_cast<size_t>(valid ? b : 0) * kBlock + slot;
    const size_t off = (tok * p.hq + g * group + i % group) * D + c;
    CpAsync16(qs + r * kStride + c, q + off, valid);
  }
}

template <int D>
__global__ void __launch_bounds__(32 * kCtaMtiles / 2) dflash_mma_fwd(Params p, int nbc) {
  constexpr int kS = D + 8, kK16 = D / 16, kN8 = kSub / 8;
  extern __shared__ uint4 smem_u4[];
  __shared__ int range_lo[kMaxNbc], range_hi[kMaxNbc];
  const int g = blockIdx.y, group = p.hq / p.hk, mt = nbc * group;
  const int b0 = blockIdx.x * nbc, nv = min(nbc, p.nb - b0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8;
  bf16_t* qs = reinterpret_cast<bf16_t*>(smem_u4);
  bf16_t* kv = qs + kBlock * mt * kS;
  auto kstage = [&](int s) { return kv + s * 2 * kTk * kS; };
  auto vstage = [&](int s) { return kv + s * 2 * kTk * kS + kTk * kS; };
  const bf16_t *kc = static_cast<const bf16_t*>(p.kc), *vc = static_cast<const bf16_t*>(p.vc);
  const bf16_t *kb = static_cast<const bf16_t*>(p.kb), *vb = static_cast<const bf16_t*>(p.vb);

  if (threadIdx.x < nv) {
    int lo, hi;
    ContextRange(p, b0 + threadIdx.x, &lo, &hi);
    range_lo[threadIdx.x] = lo;
    range_hi[threadIdx.x] = hi;
  }
  __syncthreads();
  KeySchedule sched{range_lo, range_hi, nv, b0, 0};
  for (int j = 0; j < nv; ++j) sched.max_hi = max(sched.max_hi, range_hi[j]);

  // This warp's m-tiles: block (relative to b0) and whether it is written. A dead one (a
  // missing second m-tile when mt is odd: Q rows of m-tile 0; one of a block >= nb: zero Q)
  // borrows the last live block's mask and is computed alongside its live partner only.
  int rel[2];
  bool live[2];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int i = 2 * warp + m;
    live[m] = i < mt && i / group < nv;
    rel[m] = min(min(i, mt - 1) / group, nv - 1);
  }

  // Shared byte addresses of this lane's ldmatrix rows: Q (per m-tile, + 32 per k16 step),
  // K (+ 32 per k16 step) and V (+ 32 per 16 dims), both + 16 rows per 16 keys.
  constexpr uint32_t kRowBytes = kS * 2, kStageBytes = 2 * kTk * kRowBytes;
  const uint32_t qs_addr = SmemAddr(qs), kv_addr = SmemAddr(kv);
  uint32_t q_addr[2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
    q_addr[m] =
        qs_addr + ((2 * warp + m) % mt * kBlock + (lane & 15)) * kRowBytes + (lane >> 4) * 16;
  const uint32_t k_lane = ((mi >> 1) * 8 + r8) * kRowBytes + (mi & 1) * 16;
  const uint32_t v_lane = ((mi & 1) * 8 + r8) * kRowBytes + (mi >> 1) * 16;

  Tile cur;
  bool have = sched.Next(&cur);  // the block tile always exists: have == true
  LoadQ<D>(static_cast<const bf16_t*>(p.q), p, b0, g, group, mt, qs);
  LoadKv<D>(cur.blk ? kb : kc, cur.blk ? vb : vc, cur, g, p.hk, kstage(0), vstage(0));
  CpAsyncCommit();

  float o[2][D / 8][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[m][n][0] = o[m][n][1] = o[m][n][2] = o[m][n][3] = 0.0f;
  float mrow[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
  float lrow[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
  const float qk_scale = p.scale * kLog2e;

  for (int it = 0; have; ++it) {
    CpAsyncWait<0>();
    __syncthreads();  // tile it landed for all threads; stage (it + 1) & 1 is free
    Tile nxt{};
    const int cur_blk0 = (sched.next_blk - 1) * kBlocksPerTile;  // valid when cur.blk
    have = sched.Next(&nxt);
    if (have) {
      LoadKv<D>(nxt.blk ? kb : kc, nxt.blk ? vb : vc, nxt, g, p.hk, kstage((it + 1) & 1),
                vstage((it + 1) & 1));
      CpAsyncCommit();
    }
    Span span[2];
#pragma unroll
    for (int m = 0; m < 2; ++m)
      span[m] = SpanOf(cur, rel[m], range_lo[rel[m]], range_hi[rel[m]], cur_blk0, p.causal);
    const bool act =
        (live[0] && span[0].vhi > span[0].vlo) || (live[1] && span[1].vhi > span[1].vlo);
    if (act) {
      const uint32_t ks = kv_addr + (it & 1) * kStageBytes, vs = ks + kTk * kRowBytes;
#pragma unroll 1
      for (int k0 = 0; k0 < cur.n; k0 += kSub) {
        if (!((live[0] && span[0].Meets(k0)) || (live[1] && span[1].Meets(k0)))) continue;
        const uint32_t ksub = ks + k0 * kRowBytes, vsub = vs + k0 * kRowBytes;
        // S = Q K^T over keys k0 .. k0 + kSub for both m-tiles (K rows >= cur.n are zero).
        float s[2][kN8][4];
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int n = 0; n < kN8; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kK16; ++kk) {
          uint32_t qa[2][4];
#pragma unroll
          for (int m = 0; m < 2; ++m) LdsmAt(qa[m], q_addr[m] + kk * 32);
#pragma unroll
          for (int kc16 = 0; kc16 < kSub / 16; ++kc16) {
            uint32_t r[4];
            LdsmAt(r, ksub + k_lane + kc16 * 16 * kRowBytes + kk * 32);
#pragma unroll
            for (int m = 0; m < 2; ++m) {
              Mma(s[m][2 * kc16], qa[m], r[0], r[1]);
              Mma(s[m][2 * kc16 + 1], qa[m], r[2], r[3]);
            }
          }
        }
        // Online softmax per m-tile and row half (rows gid and gid + 8); P leaves as bf16 A
        // fragments pa[m][kc16] (keys k0 + 16 kc16 ..).
        uint32_t pa[2][kSub / 16][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          float mx[2] = {mrow[m][0], mrow[m][1]};
          // Rows gid and gid + 8 see the keys [from[h], to[h]) of the tile (the Span comment).
          int from[2], to[2];
          {
            const int floor = FloorOf(cur, span[m], range_hi[rel[m]], p.window);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int slot = gid + 8 * h;
              from[h] = max(span[m].vlo, floor == INT_MIN ? INT_MIN : floor + slot);
              to[h] = span[m].causal ? min(span[m].vhi, span[m].vlo + slot + 1) : span[m].vhi;
            }
          }
#pragma unroll
          for (int n = 0; n < kN8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = k0 + n * 8 + 2 * tig + (e & 1), half = e >> 1;
              const bool sees = key >= from[half] && key < to[half];
              const float v = sees ? s[m][n][e] * qk_scale : -INFINITY;
              s[m][n][e] = v;
              mx[half] = fmaxf(mx[half], v);
            }
          float alpha[2], mref[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            mref[h] = mx[h] == -INFINITY ? 0.0f : mx[h];
            alpha[h] = Exp2(mrow[m][h] - mref[h]);  // m == -inf gives 0
            mrow[m][h] = mx[h];
            lrow[m][h] *= alpha[h];
          }
#pragma unroll
          for (int n = 0; n < D / 8; ++n) {
            o[m][n][0] *= alpha[0];
            o[m][n][1] *= alpha[0];
            o[m][n][2] *= alpha[1];
            o[m][n][3] *= alpha[1];
          }
#pragma unroll
          for (int n = 0; n < kN8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              s[m][n][e] = Exp2(s[m][n][e] - mref[e >> 1]);
              lrow[m][e >> 1] += s[m][n][e];
            }
#pragma unroll
          for (int kc16 = 0; kc16 < kSub / 16; ++kc16) {
            pa[m][kc16][0] = Pack(s[m][2 * kc16][0], s[m][2 * kc16][1]);
            pa[m][kc16][1] = Pack(s[m][2 * kc16][2], s[m][2 * kc16][3]);
            pa[m][kc16][2] = Pack(s[m][2 * kc16 + 1][0], s[m][2 * kc16 + 1][1]);
            pa[m][kc16][3] = Pack(s[m][2 * kc16 + 1][2], s[m][2 * kc16 + 1][3]);
          }
        }
        // O += P V: each V fragment feeds both m-tiles.
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
#pragma unroll
          for (int kc16 = 0; kc16 < kSub / 16; ++kc16) {
            uint32_t r[4];
            LdsmTAt(r, vsub + v_lane + kc16 * 16 * kRowBytes + np * 32);
#pragma unroll
            for (int m = 0; m < 2; ++m) {
              Mma(o[m][2 * np], pa[m][kc16], r[0], r[1]);
              Mma(o[m][2 * np + 1], pa[m][kc16], r[2], r[3]);
            }
          }
        }
      }
    }
    cur = nxt;
  }

  bf16_t* out = static_cast<bf16_t*>(p.out);
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    if (!live[m]) continue;
    const int i = 2 * warp + m, b = b0 + i / group, head = g * group + i % group;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = lrow[m][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = 1.0f / l;  // every slot sees at least its own block key: l >= 1
      const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(out + row * D + n * 8 + 2 * tig) =
            __floats2bfloat162_rn(o[m][n][2 * h] * inv, o[m][n][2 * h + 1] * inv);
      if (tig == 0) p.lse[row] = (mrow[m][h] + log2f(l)) / kLog2e;
    }
  }
}

}  // namespace

cudaError_t LaunchDFlashMmaForward(const DFlashKernelParams& p, cudaStream_t stream) {
  if (!DFlashMmaSupported(p.hq / p.hk, p.d) || (p.hq / p.hk) * p.hk != p.hq)
    return cudaErrorInvalidValue;
  const int group = p.hq / p.hk, nbc = std::max(1, kCtaMtiles / group), mt = nbc * group;
  const size_t smem = FwdSmemBytes(mt, p.d);
  auto launch = [&](auto kernel) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3((p.nb + nbc - 1) / nbc, p.hk), 32 * ((mt + 1) / 2), smem, stream>>>(p, nbc);
    return cudaGetLastError();
  };
  return p.d == 64 ? launch(dflash_mma_fwd<64>) : launch(dflash_mma_fwd<128>);
}

}  // namespace tandem::kernels::attention_internal
