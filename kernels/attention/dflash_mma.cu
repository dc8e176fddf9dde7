// DFlash block attention on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate),
// forward and backward; same contract as the SIMT kernels in dflash_attention.cu.
//
// One CTA per (block b, KV head g) with G = hq / hk warps; warp w owns the 16 query slots of
// query head g * G + w (an m16 tile). Keys stream through shared memory in tiles of 64: the
// context range [lo, anchor) first, then the block's own 16 keys (causal per slot when
// causal_in_block). Shared rows are padded by 16 bytes, so ldmatrix reads are conflict-free.
// Fragment layouts (PTX ISA, m16n8k16; lane = 4 * gid + tig):
//   A 16x16: a0 (gid, 2tig..+1), a1 (gid+8, 2tig..), a2 (gid, 2tig+8..), a3 (gid+8, 2tig+8..)
//   B 16x8:  b0 (k 2tig..+1, n gid), b1 (k 2tig+8..+1, n gid)
//   C 16x8:  c0,c1 (gid, 2tig..+1), c2,c3 (gid+8, 2tig..+1)
// forward:  cp.async double buffer; S = Q K^T, online softmax in the log2 domain, O += P V
//           with P re-packed from the S accumulators as the A operand.
// backward: per tile each warp recomputes S, P = exp(S - lse), dP = dO V^T,
//           dS = P (dP - rowsum(dO O)), dQ += dS K (registers), and stores P, dS (bf16) in
//           shared memory; after a barrier the next tile's load is issued and the warps share
//           dV = P^T dO and dK = scale dS^T Q in 16-key x 64-dim units, written directly for
//           block keys and with float4 atomics for context keys.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/dflash_mma_internal.h"

namespace tandem::kernels::attention_internal {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kTk = kMmaTileKeys;
constexpr int kPs = kTk + 8;  // row stride (elements) of the backward's P / dS tiles

using Params = DFlashKernelParams;
using bf16_t = __nv_bfloat16;

// The forward stages Q (16 rows per warp) in the second (K, V) stage; both kernels fit the
// H100/H200 opt-in shared memory (227 KiB) at the largest group.
static_assert(kBlock * kMmaMaxGroup <= 2 * kTk, "Q staging area overflows stage 1");
static_assert(DFlashMmaSmemBytes(true, kMmaMaxGroup, 128) <= 227 * 1024);
static_assert(DFlashMmaSmemBytes(false, kMmaMaxGroup, 128) <= 227 * 1024);
static_assert(kBlock == 16, "one m16 tile per query head");

__device__ inline uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; valid == false zero-fills the destination and reads nothing.
__device__ inline void CpAsync16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ inline void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ inline void Ldsm4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}
__device__ inline void Ldsm4T(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}

__device__ inline void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as bf16x2, `lo` in the low half (the lower column / k index).
__device__ inline uint32_t Pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A operand (16 rows x 16 keys, keys 16 * kc ..) from C accumulators over 8-key n-tiles.
__device__ inline void AFromC(uint32_t (&a)[4], const float (&c)[kTk / 8][4], int kc) {
  a[0] = Pack(c[2 * kc][0], c[2 * kc][1]);
  a[1] = Pack(c[2 * kc][2], c[2 * kc][3]);
  a[2] = Pack(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = Pack(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}

__device__ inline void ContextRange(const Params& p, int b, int* lo, int* hi) {
  const int a = min(max(p.anchors[b], 0), p.t);
  const int s = min(max(p.doc_start[b], 0), a);
  *hi = a;
  *lo = p.window > 0 ? max(s, a - p.window) : s;
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

// Whether key `key` of tile t is visible to query slot `slot`.
__device__ inline bool Visible(const Tile& t, bool causal, int key, int slot) {
  return key < t.n && (!t.blk || !causal || key <= slot);
}

template <int D>
__global__ void __launch_bounds__(32 * kMmaMaxGroup) dflash_mma_fwd(Params p) {
  constexpr int kS = D + 8, kK16 = D / 16;
  extern __shared__ uint4 smem_u4[];
  bf16_t* sm = reinterpret_cast<bf16_t*>(smem_u4);
  const int b = blockIdx.x, g = blockIdx.y, group = p.hq / p.hk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8;
  auto kstage = [&](int s) { return sm + s * 2 * kTk * kS; };
  auto vstage = [&](int s) { return sm + s * 2 * kTk * kS + kTk * kS; };
  int lo, hi;
  ContextRange(p, b, &lo, &hi);
  const int ctx_tiles = (hi - lo + kTk - 1) / kTk, tiles = ctx_tiles + 1;
  const bf16_t* q = static_cast<const bf16_t*>(p.q);
  const bf16_t *kc = static_cast<const bf16_t*>(p.kc), *vc = static_cast<const bf16_t*>(p.vc);
  const bf16_t *kb = static_cast<const bf16_t*>(p.kb), *vb = static_cast<const bf16_t*>(p.vb);

  // Q goes through stage 1 (free until tile 1 is issued), tile 0 into stage 0.
  LoadRows<D>(q, b, g, group, p.hq, kstage(1));
  CpAsyncCommit();
  Tile t0 = TileOf(0, ctx_tiles, lo, hi, b);
  LoadKv<D>(t0.blk ? kb : kc, t0.blk ? vb : vc, t0, g, p.hk, kstage(0), vstage(0));
  CpAsyncCommit();
  CpAsyncWait<1>();
  __syncthreads();
  uint32_t qf[kK16][4];
#pragma unroll
  for (int kk = 0; kk < kK16; ++kk)
    Ldsm4(qf[kk], kstage(1) + (warp * 16 + (lane & 15)) * kS + kk * 16 + (lane >> 4) * 8);
  __syncthreads();

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float qk_scale = p.scale * kLog2e;

  for (int it = 0; it < tiles; ++it) {
    if (it + 1 < tiles) {
      const Tile tn = TileOf(it + 1, ctx_tiles, lo, hi, b);
      LoadKv<D>(tn.blk ? kb : kc, tn.blk ? vb : vc, tn, g, p.hk, kstage((it + 1) & 1),
                vstage((it + 1) & 1));
    }
    CpAsyncCommit();  // possibly empty: keeps "all but the newest group" == tile it
    CpAsyncWait<1>();
    __syncthreads();
    const Tile t = TileOf(it, ctx_tiles, lo, hi, b);
    const bf16_t *ks = kstage(it & 1), *vs = vstage(it & 1);
    const int nk16 = (t.n + 15) / 16;

    float s[kTk / 8][4];
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kc16 = 0; kc16 < kTk / 16; ++kc16) {
      if (kc16 >= nk16) break;
#pragma unroll
      for (int kk = 0; kk < kK16; ++kk) {
        uint32_t r[4];
        Ldsm4(r, ks + (kc16 * 16 + (mi >> 1) * 8 + r8) * kS + kk * 16 + (mi & 1) * 8);
        Mma(s[2 * kc16], qf[kk], r[0], r[1]);
        Mma(s[2 * kc16 + 1], qf[kk], r[2], r[3]);
      }
    }
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n * 8 + 2 * tig + (e & 1), half = e >> 1;
        const float v = Visible(t, p.causal, key, gid + 8 * half) ? s[n][e] * qk_scale : -INFINITY;
        s[n][e] = v;
        mx[half] = fmaxf(mx[half], v);
      }
    float alpha[2], mref[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      mref[h] = mx[h] == -INFINITY ? 0.0f : mx[h];
      alpha[h] = exp2f(m[h] - mref[h]);  // m == -inf gives 0
      m[h] = mx[h];
      l[h] *= alpha[h];
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = exp2f(s[n][e] - mref[e >> 1]);
        l[e >> 1] += s[n][e];
      }
#pragma unroll
    for (int kc16 = 0; kc16 < kTk / 16; ++kc16) {
      if (kc16 >= nk16) break;
      uint32_t a[4];
      AFromC(a, s, kc16);
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        uint32_t r[4];
        Ldsm4T(r, vs + (kc16 * 16 + (mi & 1) * 8 + r8) * kS + np * 16 + (mi >> 1) * 8);
        Mma(o[2 * np], a, r[0], r[1]);
        Mma(o[2 * np + 1], a, r[2], r[3]);
      }
    }
    __syncthreads();  // stage it & 1 is consumed before tile it + 2 overwrites it
  }

  bf16_t* out = static_cast<bf16_t*>(p.out);
  const int head = g * group + warp;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const float inv = 1.0f / l[h];  // every slot sees at least its own block key: l >= 1
    const size_t row = static_cast<size_t>(b * kBlock + gid + 8 * h) * p.hq + head;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(out + row * D + n * 8 + 2 * tig) =
          __floats2bfloat162_rn(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    if (tig == 0) p.lse[row] = (m[h] + log2f(l[h])) / kLog2e;
  }
}

template <int D>
__global__ void __launch_bounds__(32 * kMmaMaxGroup) dflash_mma_bwd(Params p) {
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
    for (int n = 0; n < kTk / 8; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int off = (warp * 16 + gid + 8 * h) * kPs + n * 8 + 2 * tig;
        *reinterpret_cast<uint32_t*>(ps + off) = Pack(s[n][2 * h], s[n][2 * h + 1]);
        *reinterpret_cast<uint32_t*>(dss + off) = Pack(dp[n][2 * h], dp[n][2 * h + 1]);
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

}  // namespace

cudaError_t LaunchDFlashMma(const DFlashKernelParams& p, bool backward, cudaStream_t stream) {
  const int group = p.hq / p.hk;
  const size_t smem = DFlashMmaSmemBytes(backward, group, p.d);
  auto launch = [&](auto kernel) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.nb, p.hk), 32 * group, smem, stream>>>(p);
    return cudaGetLastError();
  };
  if (!DFlashMmaSupported(group, p.d) || group * p.hk != p.hq) return cudaErrorInvalidValue;
  if (p.d == 64) return backward ? launch(dflash_mma_bwd<64>) : launch(dflash_mma_fwd<64>);
  return backward ? launch(dflash_mma_bwd<128>) : launch(dflash_mma_fwd<128>);
}

}  // namespace tandem::kernels::attention_internal
