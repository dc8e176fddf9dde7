// DFlash block attention backward on tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate); same contract as the SIMT kernel in dflash_attention.cu. Three kernels:
//   * dflash_mma_bwd_fused (no delta scratch): everything in one pass, context dK/dV added
//     with float4 atomics;
//   * dflash_mma_bwd_query + dflash_mma_bwd_ctx (the split backward, with delta): a
//     query-major kernel grouped like the forward (dQ, block dK/dV, delta) and a key-major
//     one that writes each context dK/dV row once (no atomics, deterministic).
//
// Fused: one CTA per (block b, KV head g) with G = hq / hk warps; warp w owns the 16 query
// slots of query head g * G + w. Per key tile (as in the forward) each warp recomputes S,
// P = exp(S - lse), dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ += dS K (registers), and
// stores P, dS (bf16) in shared memory; after a barrier the next tile's load is issued and
// the warps share dV = P^T dO and dK = scale dS^T Q in 16-key x 64-dim units, written
// directly for block keys and with float4 atomics for context keys.
#include <climits>

#include "kernels/attention/dflash_mma_device.cuh"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers

template <int D>
__global__ void __launch_bounds__(32 * kMmaMaxGroup) dflash_mma_bwd_fused(Params p) {
  constexpr int kS = D + 8, kK16 = D / 16;
  extern __shared__ uint4 smem_u4[];
  const int b = blockIdx.x, g = blockIdx.y, group = p.hq / p.hk, rows = kBlock * group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8;
  bf16_t* qs = reinterpret_cast<bf16_t*>(smem_u4);  // [rows][kS]
  bf16_t* dos = qs + rows * kS;                     // [rows][kS]
  bf16_t* ks = dos + rows * kS;                     // [kTk][kS]
  bf16_t* vs = ks + kTk * kS;                       // [kTk][kS]
  bf16_t* ps = vs + kTk * kS;                       // [rows][kPs]
  bf16_t* dss = ps + rows * kPs;                    // [rows][kPs]
  int lo, hi;
  ContextRange(p, b, &lo, &hi);
  const int ctx_tiles = (hi - lo + kTk - 1) / kTk, tiles = ctx_tiles + 1;
  const bf16_t *kc = static_cast<const bf16_t*>(p.kc), *vc = static_cast<const bf16_t*>(p.vc);
  const bf16_t *kb = static_cast<const bf16_t*>(p.kb), *vb = static_cast<const bf16_t*>(p.vb);
  const bf16_t* dout = static_cast<const bf16_t*>(p.dout);
  const bf16_t* o_in = static_cast<const bf16_t*>(p.o_in);

  LoadRows<D>(static_cast<const bf16_t*>(p.q), b, g, group, p.hq, qs);
  LoadRows<D>(dout, b, g, group, p.hq, dos);
  Tile t0 = TileOf(0, ctx_tiles, lo, hi, b);
  LoadKv<D>(t0.blk ? kb : kc, t0.blk ? vb : vc, t0, g, p.hk, ks, vs);
  CpAsyncCommit();

  // Per row (gid, gid + 8 of this warp's head): lse in log2 units and rowsum(dO * O).
  const int head = g * group + warp;
  float lse2[2], delta[2];
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
  }
  const float qk_scale = p.scale * kLog2e;
  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  const bf16_t* qw = qs + warp * 16 * kS;
  const bf16_t* dow = dos + warp * 16 * kS;

  for (int it = 0; it < tiles; ++it) {
    CpAsyncWait<0>();
    __syncthreads();  // K/V of tile it landed; the previous tile's P / dS are consumed
    const Tile t = TileOf(it, ctx_tiles, lo, hi, b);
    const int nk16 = (t.n + 15) / 16;

    // Phase 1 (own 16 rows): S, dP, then P and dS in registers.
    float s[kTk / 8][4], dp[kTk / 8][4];
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kK16; ++kk) {
      uint32_t qa[4], da[4];
      Ldsm4(qa, qw + (lane & 15) * kS + kk * 16 + (lane >> 4) * 8);
      Ldsm4(da, dow + (lane & 15) * kS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int kc16 = 0; kc16 < kTk / 16; ++kc16) {
        if (kc16 >= nk16) break;
        const int off = (kc16 * 16 + (mi >> 1) * 8 + r8) * kS + kk * 16 + (mi & 1) * 8;
        uint32_t r[4];
        Ldsm4(r, ks + off);
        Mma(s[2 * kc16], qa, r[0], r[1]);
        Mma(s[2 * kc16 + 1], qa, r[2], r[3]);
        Ldsm4(r, vs + off);
        Mma(dp[2 * kc16], da, r[0], r[1]);
        Mma(dp[2 * kc16 + 1], da, r[2], r[3]);
      }
    }
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n * 8 + 2 * tig + (e & 1), half = e >> 1;
        const float pr = Visible(t, p.causal, key, gid + 8 * half)
                             ? exp2f(s[n][e] * qk_scale - lse2[half])
                             : 0.0f;
        s[n][e] = pr;
        dp[n][e] = pr * (dp[n][e] - delta[half]);  // dS (before the softmax scale)
      }
    // P and dS to shared memory for phase 2; rows warp * 16 + gid (+ 8).
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int off = (warp * 16 + gid + 8 * h) * kPs + n * 8 + 2 * tig;
        *reinterpret_cast<uint32_t*>(ps + off) = Pack(s[n][2 * h], s[n][2 * h + 1]);
        *reinterpret_cast<uint32_t*>(dss + off) = Pack(dp[n][2 * h], dp[n][2 * h + 1]);
      }
    }
    // dQ += dS K: B[key][dim] = K[key][dim] is k-major, hence ldmatrix.trans.
#pragma unroll
    for (int kc16 = 0; kc16 < kTk / 16; ++kc16) {
      if (kc16 >= nk16) break;
      uint32_t a[4];
      AFromC(a, dp, kc16);
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        uint32_t r[4];
        Ldsm4T(r, ks + (kc16 * 16 + (mi & 1) * 8 + r8) * kS + np * 16 + (mi >> 1) * 8);
        Mma(dq[2 * np], a, r[0], r[1]);
        Mma(dq[2 * np + 1], a, r[2], r[3]);
      }
    }
    __syncthreads();  // K/V consumed by every warp; P / dS visible
    if (it + 1 < tiles) {
      const Tile tn = TileOf(it + 1, ctx_tiles, lo, hi, b);
      LoadKv<D>(tn.blk ? kb : kc, tn.blk ? vb : vc, tn, g, p.hk, ks, vs);
    }
    CpAsyncCommit();

    // Phase 2: units (dV or dK, 16-key m-tile, 64-dim chunk) shared among the warps.
    // A[key][row] = P[row][key] (or dS) is stored row-major by query row: ldmatrix.trans.
    const int units = 2 * nk16 * (D / 64);
    for (int u = warp; u < units; u += group) {
      const bool is_dk = u % 2 == 1;
      const int mt = (u / 2) % nk16, dc = u / (2 * nk16);
      const bf16_t* as = is_dk ? dss : ps;
      const bf16_t* bs = is_dk ? qs : dos;
      float acc[8][4];
#pragma unroll
      for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
      for (int kr = 0; kr < group; ++kr) {
        uint32_t a[4];
        Ldsm4T(a, as + (kr * 16 + (mi >> 1) * 8 + r8) * kPs + mt * 16 + (mi & 1) * 8);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t r[4];
          Ldsm4T(r, bs + (kr * 16 + (mi & 1) * 8 + r8) * kS + dc * 64 + np * 16 + (mi >> 1) * 8);
          Mma(acc[2 * np], a, r[0], r[1]);
          Mma(acc[2 * np + 1], a, r[2], r[3]);
        }
      }
      const float f = is_dk ? p.scale : 1.0f;
      if (t.blk) {
        bf16_t* dst = static_cast<bf16_t*>(is_dk ? p.dkb : p.dvb);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const size_t row = static_cast<size_t>(t.first + mt * 16 + gid + 8 * h) * p.hk + g;
#pragma unroll
          for (int n = 0; n < 8; ++n)
            *reinterpret_cast<__nv_bfloat162*>(dst + row * D + dc * 64 + n * 8 + 2 * tig) =
                __floats2bfloat162_rn(acc[n][2 * h] * f, acc[n][2 * h + 1] * f);
        }
      } else {
        // Pair lanes tig, tig ^ 1: the even one adds row gid, columns 2 tig .. 2 tig + 3,
        // the odd one row gid + 8, columns 2 (tig - 1) .. 2 tig + 1, as one float4.
        float* dst = is_dk ? p.dkc : p.dvc;
        const bool odd = tig & 1;
        const int key = mt * 16 + gid + (odd ? 8 : 0);
        const size_t row = static_cast<size_t>(t.first + key) * p.hk + g;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const float y0 = __shfl_xor_sync(0xffffffffu, acc[n][0], 1);
          const float y1 = __shfl_xor_sync(0xffffffffu, acc[n][1], 1);
          const float y2 = __shfl_xor_sync(0xffffffffu, acc[n][2], 1);
          const float y3 = __shfl_xor_sync(0xffffffffu, acc[n][3], 1);
          const float4 v = odd ? make_float4(y2 * f, y3 * f, acc[n][2] * f, acc[n][3] * f)
                               : make_float4(acc[n][0] * f, acc[n][1] * f, y0 * f, y1 * f);
          if (key < t.n)
            atomicAdd(reinterpret_cast<float4*>(dst + row * D + dc * 64 + n * 8 + 2 * (tig & ~1)),
                      v);
        }
      }
    }
  }

  bf16_t* dqo = static_cast<bf16_t*>(p.dq);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dqo + row * D + n * 8 + 2 * tig) =
          __floats2bfloat162_rn(dq[n][2 * h] * p.scale, dq[n][2 * h + 1] * p.scale);
  }
}

// Split backward, query-major part (dQ, block dK/dV, delta), grouped like the forward: one
// CTA takes NBC = max(1, 8 / G) consecutive blocks x the G query heads of KV head g, i.e.
// mt = NBC * G <= 8 m-tiles (16 slots of one (block, head)), numbered block-major, and
// ceil(mt / 2) warps; warp w owns m-tiles 2w and 2w + 1, so each K or V fragment it reads
// feeds two MMAs. The blocks share one key stream (context tiles of kBt keys over the union
// of their ranges, gaps skipped, then tiles of kBt / 16 blocks' own keys), double buffered
// with cp.async and one __syncthreads per tile. Per tile and m-tile: S = Q K^T and
// dP = dO V^T (Q, dO in shared memory), P = exp(S - lse) on the keys the m-tile sees,
// dS = P (dP - delta), dQ += dS K (registers). Own-key tiles also leave each live m-tile's
// 16 x 16 P and dS of its block in shared memory; after the stream, dQ is written and the
// warps share dV = P^T dO and dK = scale dS^T Q of the blocks' keys in (block, dK or dV,
// 64-dim) units, summing the block's G heads in a fixed order. Dead m-tiles (the missing
// partner when mt is odd, blocks >= nb) get lse = +inf, hence P = dS = 0.
constexpr int kQMtiles = 8;                 // m-tiles per CTA at most (4 warps)
constexpr int kQMaxNbc = kQMtiles;          // blocks per CTA at most (G == 1)
constexpr int kBt = kBwdTileKeys;           // keys per tile (one S / dP / dQ step)
constexpr int kOwnBlocks = kBt / kBlock;    // blocks whose own keys share one tile
static_assert(DFlashMmaQueryBwdSmemBytes(kMmaMaxGroup, 128) <= 227 * 1024);

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

// Element offset of (row, col) in a 16 x 16 bf16 tile stored without padding: the two
// 8-column halves swap on rows 4..7 and 12..15, so the 8 rows an ldmatrix reads hit 8
// distinct 16-byte bank groups.
__device__ inline int SwizzledOffset(int row, int col) {
  return row * 16 + (((col >> 3) ^ ((row >> 2) & 1)) << 3) + (col & 7);
}

// The CTA's key stream: context tiles covering the union of the blocks' ranges, then the
// blocks' own keys. Every thread runs the same schedule on the shared ranges.
struct KeyStream {
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
      *t = {false, s, min(kBt, max_hi - s)};
      pos = s + kBt;
      return true;
    }
    if (next_blk * kOwnBlocks >= nv) return false;
    const int first = next_blk * kOwnBlocks;
    *t = {true, (b0 + first) * kBlock, kBlock * min(kOwnBlocks, nv - first)};
    ++next_blk;
    return true;
  }
};

// Keys [vlo, vhi) of a tile that one m-tile sees; with `causal`, key k also needs
// k - vlo <= slot (its own 16 keys, causal in the block).
struct KeySpan {
  int vlo, vhi;
  bool causal;
  __device__ bool Empty() const { return vhi <= vlo; }
  __device__ bool Sees(int key, int slot) const {
    return key >= vlo && key < vhi && (!causal || key - vlo <= slot);
  }
};
__device__ inline KeySpan SpanOf(const Tile& t, int rel, int lo, int hi, int tile_blk0,
                                 bool causal) {
  if (!t.blk) return {max(lo - t.first, 0), min(hi - t.first, t.n), false};
  const int c = rel - tile_blk0;
  if (c < 0 || c >= kOwnBlocks) return {0, 0, false};
  return {c * kBlock, c * kBlock + kBlock, causal};
}

// Async-loads the 16 rows of each of the mt m-tiles of x (Q or dO) into [16 mt][D + 8];
// m-tiles of blocks >= nb are zero-filled.
template <int D>
__device__ inline void LoadMtiles(const bf16_t* x, const Params& p, int b0, int g, int group,
                                  int mt, bf16_t* xs) {
  constexpr int kChunks = D / 8, kStride = D + 8;
  for (int e = threadIdx.x; e < kBlock * mt * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = (e % kChunks) * 8;
    const int i = r / kBlock, slot = r % kBlock, b = b0 + i / group;
    const bool valid = b < p.nb;
    const size_t tok = static_cast<size_t>(valid ? b : 0) * kBlock + slot;
    const size_t off = (tok * p.hq + g * group + i % group) * D + c;
    CpAsync16(xs + r * kStride + c, x + off, valid);
  }
}

// Async-loads keys [first, first + n) of KV head g into [kBt][D + 8] K and V tiles,
// zero-filling rows n .. kBt - 1.
template <int D>
__device__ inline void LoadKvTile(const bf16_t* k, const bf16_t* v, const Tile& t, int g, int hk,
                                  bf16_t* ks, bf16_t* vs) {
  constexpr int kChunks = D / 8, kStride = D + 8;
  for (int e = threadIdx.x; e < kBt * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = (e % kChunks) * 8;
    const bool valid = r < t.n;
    const size_t off = (static_cast<size_t>(t.first + (valid ? r : 0)) * hk + g) * D + c;
    CpAsync16(ks + r * kStride + c, k + off, valid);
    CpAsync16(vs + r * kStride + c, v + off, valid);
  }
}

// A operand (16 rows x keys 16 kc ..) of bf16 from fp32 C accumulators over 8-key n-tiles.
__device__ inline void AFromC32(uint32_t (&a)[4], const float (&c)[kBt / 8][4], int kc) {
  a[0] = Pack(c[2 * kc][0], c[2 * kc][1]);
  a[1] = Pack(c[2 * kc][2], c[2 * kc][3]);
  a[2] = Pack(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = Pack(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}

template <int D>
__global__ void __launch_bounds__(32 * kQMtiles / 2) dflash_mma_bwd_query(Params p, int nbc) {
  constexpr int kS = D + 8, kK16 = D / 16, kN8 = kBt / 8;
  extern __shared__ uint4 smem_u4[];
  __shared__ int range_lo[kQMaxNbc], range_hi[kQMaxNbc];
  const int g = blockIdx.y, group = p.hq / p.hk, mt = nbc * group;
  const int b0 = blockIdx.x * nbc, nv = min(nbc, p.nb - b0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8;
  bf16_t* qs = reinterpret_cast<bf16_t*>(smem_u4);  // [16 mt][kS]
  bf16_t* dos = qs + kBlock * mt * kS;               // [16 mt][kS]
  bf16_t* kv = dos + kBlock * mt * kS;               // [2 stages][K, V][kBt][kS]
  bf16_t* pds = kv + 4 * kBt * kS;                   // P [mt][16 x 16], then dS [mt][16 x 16]
  auto kstage = [&](int s) { return kv + s * 2 * kBt * kS; };
  const bf16_t *kc = static_cast<const bf16_t*>(p.kc), *vc = static_cast<const bf16_t*>(p.vc);
  const bf16_t *kb = static_cast<const bf16_t*>(p.kb), *vb = static_cast<const bf16_t*>(p.vb);
  const bf16_t* dout = static_cast<const bf16_t*>(p.dout);
  const bf16_t* o_in = static_cast<const bf16_t*>(p.o_in);

  if (threadIdx.x < nv) {
    int lo, hi;
    ContextRange(p, b0 + threadIdx.x, &lo, &hi);
    range_lo[threadIdx.x] = lo;
    range_hi[threadIdx.x] = hi;
  }
  __syncthreads();
  KeyStream stream{range_lo, range_hi, nv, b0, 0};
  for (int j = 0; j < nv; ++j) stream.max_hi = max(stream.max_hi, range_hi[j]);

  Tile cur;
  bool have = stream.Next(&cur);  // the own-key tile always exists: have == true
  LoadMtiles<D>(static_cast<const bf16_t*>(p.q), p, b0, g, group, mt, qs);
  LoadMtiles<D>(dout, p, b0, g, group, mt, dos);
  LoadKvTile<D>(cur.blk ? kb : kc, cur.blk ? vb : vc, cur, g, p.hk, kstage(0),
                kstage(0) + kBt * kS);
  CpAsyncCommit();

  // This warp's m-tiles: block (relative to b0), whether written, per row half (rows gid,
  // gid + 8) lse in log2 units and delta = rowsum(dO O) (stored for the context kernel).
  int rel[2];
  bool live[2];
  float lse2[2][2], dl[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int i = 2 * warp + m;
    live[m] = i < mt && i / group < nv;
    rel[m] = min(min(i, mt - 1) / group, nv - 1);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      lse2[m][h] = INFINITY;
      dl[m][h] = 0.0f;
      if (!live[m]) continue;
      const size_t row =
          static_cast<size_t>((b0 + i / group) * kBlock + gid + 8 * h) * p.hq + g * group +
          i % group;
      lse2[m][h] = p.lse_in[row] * kLog2e;
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
      dl[m][h] = acc;
      if (tig == 0) p.delta[row] = acc;
    }
  }

  // Shared byte addresses of this lane's ldmatrix rows: Q, dO (per m-tile, + 32 per k16
  // step); K, V for S / dP (+ 32 per k16 step) and K for dQ (+ 32 per 16 dims), + 16 rows per
  // 16 keys.
  constexpr uint32_t kRowBytes = kS * 2, kStageBytes = 2 * kBt * kRowBytes;
  const uint32_t kv_addr = SmemAddr(kv), mt_bytes = kBlock * mt * kRowBytes;
  uint32_t q_addr[2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
    q_addr[m] = SmemAddr(qs) + ((2 * warp + m) % mt * kBlock + (lane & 15)) * kRowBytes +
                (lane >> 4) * 16;
  const uint32_t k_lane = ((mi >> 1) * 8 + r8) * kRowBytes + (mi & 1) * 16;
  const uint32_t kt_lane = ((mi & 1) * 8 + r8) * kRowBytes + (mi >> 1) * 16;

  float dq[2][D / 8][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < D / 8; ++n) dq[m][n][0] = dq[m][n][1] = dq[m][n][2] = dq[m][n][3] = 0.0f;
  const float qk_scale = p.scale * kLog2e;

  for (int it = 0; have; ++it) {
    CpAsyncWait<0>();
    __syncthreads();  // tile it landed for all threads; stage (it + 1) & 1 is free
    Tile nxt{};
    const int cur_blk0 = (stream.next_blk - 1) * kOwnBlocks;  // valid when cur.blk
    have = stream.Next(&nxt);
    if (have) {
      bf16_t* ks = kstage((it + 1) & 1);
      LoadKvTile<D>(nxt.blk ? kb : kc, nxt.blk ? vb : vc, nxt, g, p.hk, ks, ks + kBt * kS);
      CpAsyncCommit();
    }
    KeySpan span[2];
#pragma unroll
    for (int m = 0; m < 2; ++m)
      span[m] = SpanOf(cur, rel[m], range_lo[rel[m]], range_hi[rel[m]], cur_blk0, p.causal);
    const bool act = (live[0] && !span[0].Empty()) || (live[1] && !span[1].Empty());
    if (act) {
      const uint32_t ks = kv_addr + (it & 1) * kStageBytes, vs = ks + kBt * kRowBytes;
      // S = Q K^T and dP = dO V^T for both m-tiles (K, V rows >= cur.n are zero).
      float s[2][kN8][4], dp[2][kN8][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < kN8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[m][n][e] = dp[m][n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kK16; ++kk) {
        uint32_t qa[2][4], da[2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          LdsmAt(qa[m], q_addr[m] + kk * 32);
          LdsmAt(da[m], q_addr[m] + mt_bytes + kk * 32);
        }
#pragma unroll
        for (int kc16 = 0; kc16 < kBt / 16; ++kc16) {
          uint32_t r[4];
          LdsmAt(r, ks + k_lane + kc16 * 16 * kRowBytes + kk * 32);
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            Mma(s[m][2 * kc16], qa[m], r[0], r[1]);
            Mma(s[m][2 * kc16 + 1], qa[m], r[2], r[3]);
          }
          LdsmAt(r, vs + k_lane + kc16 * 16 * kRowBytes + kk * 32);
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            Mma(dp[m][2 * kc16], da[m], r[0], r[1]);
            Mma(dp[m][2 * kc16 + 1], da[m], r[2], r[3]);
          }
        }
      }
      // P in s, dS (before the softmax scale) in dp.
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < kN8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = n * 8 + 2 * tig + (e & 1), half = e >> 1;
            const float pr = span[m].Sees(key, gid + 8 * half)
                                 ? exp2f(s[m][n][e] * qk_scale - lse2[m][half])
                                 : 0.0f;
            s[m][n][e] = pr;
            dp[m][n][e] = pr * (dp[m][n][e] - dl[m][half]);
          }
      if (cur.blk) {
        // Own keys: the live m-tile's P and dS over its block's 16 keys [vlo, vlo + 16).
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          if (!live[m] || span[m].Empty()) continue;
          bf16_t* pm = pds + (2 * warp + m) * kBlock * kBlock;
          bf16_t* dsm = pm + mt * kBlock * kBlock;
#pragma unroll
          for (int n = 0; n < kN8; ++n) {
            const int col = n * 8 - span[m].vlo;
            if (col < 0 || col >= kBlock) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int off = SwizzledOffset(gid + 8 * h, col + 2 * tig);
              *reinterpret_cast<uint32_t*>(pm + off) = Pack(s[m][n][2 * h], s[m][n][2 * h + 1]);
              *reinterpret_cast<uint32_t*>(dsm + off) = Pack(dp[m][n][2 * h], dp[m][n][2 * h + 1]);
            }
          }
        }
      }
      // dQ += dS K: B[key][dim] = K[key][dim] is k-major, hence ldmatrix.trans.
#pragma unroll
      for (int kc16 = 0; kc16 < kBt / 16; ++kc16) {
        uint32_t a[2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) AFromC32(a[m], dp[m], kc16);
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t r[4];
          LdsmTAt(r, ks + kt_lane + kc16 * 16 * kRowBytes + np * 32);
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            Mma(dq[m][2 * np], a[m], r[0], r[1]);
            Mma(dq[m][2 * np + 1], a[m], r[2], r[3]);
          }
        }
      }
    }
    cur = nxt;
  }

  bf16_t* dqo = static_cast<bf16_t*>(p.dq);
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    if (!live[m]) continue;
    const int i = 2 * warp + m, b = b0 + i / group, head = g * group + i % group;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(dqo + row * D + n * 8 + 2 * tig) =
            __floats2bfloat162_rn(dq[m][n][2 * h] * p.scale, dq[m][n][2 * h + 1] * p.scale);
    }
  }
  __syncthreads();  // every live m-tile's P / dS is in shared memory

  // Block keys: units (block, dV or dK, 64-dim chunk); A[key][row] = P[row][key] (or dS)
  // and B[row][dim] = dO (or Q) are stored by query row: ldmatrix.trans for both.
  constexpr int kChunks64 = D / 64;
  const int units = nv * 2 * kChunks64, warps = blockDim.x / 32;
  for (int u = warp; u < units; u += warps) {
    const int blk = u / (2 * kChunks64), is_dk = u % 2, dc = (u / 2) % kChunks64;
    const bf16_t* as = pds + (is_dk ? mt : 0) * kBlock * kBlock;
    const bf16_t* bs = is_dk ? qs : dos;
    float acc[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    for (int h = 0; h < group; ++h) {
      const int i = blk * group + h, arow = (mi >> 1) * 8 + r8;
      uint32_t a[4];
      Ldsm4T(a, as + i * kBlock * kBlock + SwizzledOffset(arow, (mi & 1) * 8));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t r[4];
        Ldsm4T(r, bs + (i * kBlock + (mi & 1) * 8 + r8) * kS + dc * 64 + np * 16 + (mi >> 1) * 8);
        Mma(acc[2 * np], a, r[0], r[1]);
        Mma(acc[2 * np + 1], a, r[2], r[3]);
      }
    }
    const float f = is_dk ? p.scale : 1.0f;
    bf16_t* dst = static_cast<bf16_t*>(is_dk ? p.dkb : p.dvb);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const size_t row = static_cast<size_t>((b0 + blk) * kBlock + gid + 8 * h) * p.hk + g;
#pragma unroll
      for (int n = 0; n < 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(dst + row * D + dc * 64 + n * 8 + 2 * tig) =
            __floats2bfloat162_rn(acc[n][2 * h] * f, acc[n][2 * h + 1] * f);
    }
  }
}

// Context dK/dV, key-major (split backward). CTA (key tile kt, KV head g), 4 warps; warp
// w owns context keys k0 + 16 w .. + 15 of the tile (the M dimension). The CTA lists, in
// block order, the blocks whose range [lo, anchor) meets the tile, then walks (block, chunk
// of up to 4 query heads of g) items with a cp.async double buffer of Q, dO (64 rows each),
// lse and delta. Per item each warp forms S^T = K Q^T and dP^T = V dO^T (16 keys x 64 rows),
// P^T = exp(S^T - lse) on the keys the block sees, dS^T = P^T (dP^T - delta), and adds
// dV += P^T dO, dK += dS^T Q in registers. Each key row is written once at the end.
template <int D>
__global__ void __launch_bounds__(32 * kCtxWarps, 2) dflash_mma_bwd_ctx(Params p) {
  constexpr int kS = D + 8, kK16 = D / 16, kRows = 16 * kCtxHeads, kChunks = D / 8;
  extern __shared__ uint4 smem_u4[];
  bf16_t* ks = reinterpret_cast<bf16_t*>(smem_u4);  // [kTk][kS]
  bf16_t* vs = ks + kTk * kS;                       // [kTk][kS]
  bf16_t* qs = vs + kTk * kS;                       // [2][kRows][kS]
  bf16_t* dos = qs + 2 * kRows * kS;                // [2][kRows][kS]
  float* lse_s = reinterpret_cast<float*>(dos + 2 * kRows * kS);  // [2][kRows], log2 units
  float* delta_s = lse_s + 2 * kRows;                              // [2][kRows]
  int* list = reinterpret_cast<int*>(delta_s + 2 * kRows);         // [kCtxListCap]
  __shared__ int warp_count[kCtxWarps];

  const int g = blockIdx.y, group = p.hq / p.hk, chunks = (group + kCtxHeads - 1) / kCtxHeads;
  const int k0 = blockIdx.x * kTk, k1 = min(k0 + kTk, p.t);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8;
  const bf16_t* q = static_cast<const bf16_t*>(p.q);
  const bf16_t* dout = static_cast<const bf16_t*>(p.dout);

  // This tile's K and V rows (zero past t), resident for the whole kernel.
  LoadKv<D>(static_cast<const bf16_t*>(p.kc), static_cast<const bf16_t*>(p.vc),
            Tile{false, k0, k1 - k0}, g, p.hk, ks, vs);
  CpAsyncCommit();

  // Item i of the list: block list[i / chunks], heads g * G + 4 (i % chunks) + 0..3.
  auto load_item = [&](int i, int st) {
    const int b = list[i / chunks], h0 = (i % chunks) * kCtxHeads;
    const int heads = min(kCtxHeads, group - h0);
    for (int e = threadIdx.x; e < kRows * kChunks; e += blockDim.x) {
      const int r = e / kChunks, c = (e % kChunks) * 8, w = r / kBlock, slot = r % kBlock;
      const bool valid = w < heads;
      const size_t off =
          (static_cast<size_t>(b * kBlock + slot) * p.hq + g * group + h0 + (valid ? w : 0)) * D +
          c;
      CpAsync16(qs + (st * kRows + r) * kS + c, q + off, valid);
      CpAsync16(dos + (st * kRows + r) * kS + c, dout + off, valid);
    }
    for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
      const int w = r / kBlock, slot = r % kBlock;
      const size_t row = static_cast<size_t>(b * kBlock + slot) * p.hq + g * group + h0 + w;
      const bool valid = w < heads;
      lse_s[st * kRows + r] = valid ? p.lse_in[row] * kLog2e : INFINITY;  // P = 0 if padded
      delta_s[st * kRows + r] = valid ? p.delta[row] : 0.0f;
    }
  };

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  const float qk_scale = p.scale * kLog2e;
  const int key_lo = k0 + warp * 16 + gid;  // keys key_lo and key_lo + 8 of this lane
  const bf16_t* kw = ks + warp * 16 * kS;
  const bf16_t* vw = vs + warp * 16 * kS;

  for (int start = 0; start < p.nb;) {
    // Compact the blocks that see any key of [k0, k1), in block order, up to the capacity.
    int count = 0;
    for (; start < p.nb && count + 32 * kCtxWarps <= kCtxListCap; start += 32 * kCtxWarps) {
      const int b = start + threadIdx.x;
      bool sees = false;
      if (b < p.nb) {
        int lo, hi;
        ContextRange(p, b, &lo, &hi);
        sees = lo < k1 && hi > k0;
      }
      const unsigned mask = __ballot_sync(0xffffffffu, sees);
      if (lane == 0) warp_count[warp] = __popc(mask);
      __syncthreads();
      int off = count, total = 0;
      for (int w = 0; w < kCtxWarps; ++w) {
        off += w < warp ? warp_count[w] : 0;
        total += warp_count[w];
      }
      if (sees) list[off + __popc(mask & ((1u << lane) - 1u))] = b;
      count += total;
      __syncthreads();  // warp_count reused; the list is visible
    }
    const int items = count * chunks;
    if (items > 0) load_item(0, 0);
    CpAsyncCommit();
    for (int i = 0; i < items; ++i) {
      const int st = i & 1;
      if (i + 1 < items) load_item(i + 1, st ^ 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
      __syncthreads();
      int lo, hi;
      ContextRange(p, list[i / chunks], &lo, &hi);
      const bool see0 = key_lo >= lo && key_lo < hi, see1 = key_lo + 8 >= lo && key_lo + 8 < hi;
      const bf16_t* qi = qs + st * kRows * kS;
      const bf16_t* di = dos + st * kRows * kS;
      const float* lse_i = lse_s + st * kRows;
      const float* delta_i = delta_s + st * kRows;

      // S^T and dP^T: [16 keys] x [64 rows] per warp, 8 n-tiles of 8 rows.
      float sc[kRows / 8][4], dp[kRows / 8][4];
#pragma unroll
      for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) sc[n][e] = dp[n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kK16; ++kk) {
        uint32_t ka[4], va[4];
        Ldsm4(ka, kw + (lane & 15) * kS + kk * 16 + (lane >> 4) * 8);
        Ldsm4(va, vw + (lane & 15) * kS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int np = 0; np < kRows / 16; ++np) {
          const int off = (np * 16 + (mi >> 1) * 8 + r8) * kS + kk * 16 + (mi & 1) * 8;
          uint32_t r[4];
          Ldsm4(r, qi + off);
          Mma(sc[2 * np], ka, r[0], r[1]);
          Mma(sc[2 * np + 1], ka, r[2], r[3]);
          Ldsm4(r, di + off);
          Mma(dp[2 * np], va, r[0], r[1]);
          Mma(dp[2 * np + 1], va, r[2], r[3]);
        }
      }
#pragma unroll
      for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = n * 8 + 2 * tig + (e & 1);
          const bool see = (e >> 1) ? see1 : see0;
          const float pr = see ? exp2f(sc[n][e] * qk_scale - lse_i[row]) : 0.0f;
          sc[n][e] = pr;
          dp[n][e] = pr * (dp[n][e] - delta_i[row]);
        }
      // dV += P^T dO and dK += dS^T Q; B[row][dim] is row-major by query row: ldmatrix.trans.
#pragma unroll
      for (int kc16 = 0; kc16 < kRows / 16; ++kc16) {
        uint32_t pa[4], sa[4];
        AFromC(pa, sc, kc16);
        AFromC(sa, dp, kc16);
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          const int off = (kc16 * 16 + (mi & 1) * 8 + r8) * kS + np * 16 + (mi >> 1) * 8;
          uint32_t r[4];
          Ldsm4T(r, di + off);
          Mma(dv[2 * np], pa, r[0], r[1]);
          Mma(dv[2 * np + 1], pa, r[2], r[3]);
          Ldsm4T(r, qi + off);
          Mma(dk[2 * np], sa, r[0], r[1]);
          Mma(dk[2 * np + 1], sa, r[2], r[3]);
        }
      }
      __syncthreads();  // stage st is consumed before item i + 2 overwrites it
    }
    CpAsyncWait<0>();
    __syncthreads();  // the list is rebuilt only after every warp is done with it
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key_lo + 8 * h;
    if (key >= k1) continue;
    const size_t row = (static_cast<size_t>(key) * p.hk + g) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<float2*>(p.dkc + row + n * 8 + 2 * tig) =
          make_float2(dk[n][2 * h] * p.scale, dk[n][2 * h + 1] * p.scale);
      *reinterpret_cast<float2*>(p.dvc + row + n * 8 + 2 * tig) =
          make_float2(dv[n][2 * h], dv[n][2 * h + 1]);
    }
  }
}

}  // namespace

cudaError_t LaunchDFlashMmaBackward(const DFlashKernelParams& p, cudaStream_t stream) {
  const int group = p.hq / p.hk;
  if (!DFlashMmaSupported(group, p.d) || group * p.hk != p.hq) return cudaErrorInvalidValue;
  auto launch = [&](auto kernel, dim3 grid, int threads, size_t smem, auto... args) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<grid, threads, smem, stream>>>(p, args...);
    return cudaGetLastError();
  };
  if (p.delta == nullptr) {
    const dim3 by_block(p.nb, p.hk);
    const size_t smem = DFlashMmaFusedBwdSmemBytes(group, p.d);
    return p.d == 64 ? launch(dflash_mma_bwd_fused<64>, by_block, 32 * group, smem)
                     : launch(dflash_mma_bwd_fused<128>, by_block, 32 * group, smem);
  }
  const int mt = static_cast<int>(DFlashMmaBwdMtiles(group)), nbc = mt / group;
  const dim3 by_group((p.nb + nbc - 1) / nbc, p.hk);
  const size_t smem = DFlashMmaQueryBwdSmemBytes(group, p.d);
  cudaError_t e =
      p.d == 64 ? launch(dflash_mma_bwd_query<64>, by_group, 32 * ((mt + 1) / 2), smem, nbc)
                : launch(dflash_mma_bwd_query<128>, by_group, 32 * ((mt + 1) / 2), smem, nbc);
  if (e != cudaSuccess || p.t == 0) return e;
  const dim3 by_key((p.t + kTk - 1) / kTk, p.hk);
  const size_t ctx_smem = DFlashMmaCtxSmemBytes(p.d);
  return p.d == 64 ? launch(dflash_mma_bwd_ctx<64>, by_key, 32 * kCtxWarps, ctx_smem)
                   : launch(dflash_mma_bwd_ctx<128>, by_key, 32 * kCtxWarps, ctx_smem);
}

}  // namespace tandem::kernels::attention_internal
