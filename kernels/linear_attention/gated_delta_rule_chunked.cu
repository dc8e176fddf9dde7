// CUDA chunked gated delta rule (gated_delta_rule_chunked.h): chunk 64, dk = dv = 128, bf16
// tensor-core products (mma.sync m16n8k16, fp32 accumulation; kernels/core/ptx.cuh).
//
// Kernel 0 computes each q and k row's inverse L2 norm once per key head. The products use
// the raw bf16 q and k and apply the norms (and q's scale) in fp32, so q^ and k^ are never
// written: k^.k^ = (k.k) rk rk, q^ S = (q S) rq scale, k^^T x = k^T (rk x).
// Kernel 1, "prepare", one block per (chunk, value head), 8 warps, three per SM,
// chunk-parallel: loads the chunk's q, k, v, g, beta; gc = cumsum(g); K K^T and Q K^T on
// tensor cores (one m-tile per warp); A = strictly-lower beta_i (k^_i.k^_j) exp(gc_i - gc_j)
// to shared memory (over q, which is done) and the masked decayed Q^ K^^T (Aqk) to the
// workspace; T = (I + A)^-1 by forward substitution with one thread per column of T, the
// column in registers (no barriers), while the other warps form k^ beta exp(gc) and v beta
// (a blocked solve with all threads on the levels below the diagonal issued more
// instructions and was no faster on the H200);
// then w = T (k^ beta exp(gc)) and u = T (v beta) on tensor cores, written as bf16.
// Kernel 2, "state", one block per (32-wide slice of dv, value head, document), 8 warps,
// three per SM: the state slice S [128, 32] lives in fp32 accumulators (warp i: dk rows
// 16i..), a bf16 copy in shared memory feeds the products. Per chunk in order:
//   [P; R] = [w; q^] S (warps 0-3: P, warps 4-7: R), v' = u - P (warps 0-3, u read straight
//   into accumulator layout), o = exp(gc) R + Aqk v' (warps 4-7, Aqk read straight into A
//   fragments), S = exp(gc_last) S + k^^T (exp(gc_last - gc) v').
// The loads of chunk c + 1 are issued as soon as chunk c has read their buffers (see the
// pipeline comment at kernel 2).
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/core/ptx.cuh"
#include "kernels/linear_attention/gated_delta_rule_chunked_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
using ptx::CpAsync16;
using ptx::CpAsyncCommit;
using ptx::CpAsyncWait;
using ptx::Ldsm4;
using ptx::Ldsm4T;
using ptx::Mma;
using ptx::Pack;

constexpr int BT = 64;        // chunk
constexpr int DK = 128;       // key head dim
constexpr int DV = 128;       // value head dim
constexpr int BV = 32;        // dv slice per state block
constexpr int LDH = DK + 8;   // bf16 row pitch of [64, 128] tiles (16-byte pad: ldmatrix
                              // rows fall in distinct banks)
constexpr int LDT = BT + 8;   // bf16 row pitch of [64, 64] tiles
constexpr int LDA = BT + 4;   // f32 row pitch of A
constexpr int LDS = BV + 8;   // bf16 row pitch of [*, 32] tiles
constexpr int kThreads = 256;

// The workspace, in the order and 256-byte alignment of GatedDeltaRuleChunkedWorkspaceBytes.
struct Workspace {
  bf16_t* w;    // [hv][T][DK]
  bf16_t* u;    // [hv][T][DV]
  bf16_t* aqk;  // [hv][T][BT]
  float* rq;    // [hk][T]  1 / |q| (1 without the L2 norm)
  float* rk;    // [hk][T]  1 / |k|
  float* gc;    // [hv][T]
};

__host__ __device__ inline int64_t Align256(int64_t b) { return (b + 255) / 256 * 256; }

__device__ Workspace Carve(void* ws, int64_t t, int hk, int hv) {
  Workspace p;
  char* b = static_cast<char*>(ws);
  p.w = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hv} * t * DK * 2);
  p.u = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hv} * t * DV * 2);
  p.aqk = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hv} * t * BT * 2);
  p.rq = reinterpret_cast<float*>(b);
  b += Align256(int64_t{hk} * t * 4);
  p.rk = reinterpret_cast<float*>(b);
  b += Align256(int64_t{hk} * t * 4);
  p.gc = reinterpret_cast<float*>(b);
  return p;
}

// Async copy of rows [0, n) of a [*, 128] bf16 matrix (row pitch `stride` elements) to smem
// rows of pitch LDH; rows [n, 64) are zero-filled.
__device__ inline void LoadRows128(bf16_t* dst, const bf16_t* src, int64_t stride, int n) {
  constexpr int kRowsPerPass = kThreads / (DK / 8);
  const int r0 = threadIdx.x / (DK / 8), c = (threadIdx.x % (DK / 8)) * 8;
#pragma unroll
  for (int r = r0; r < BT; r += kRowsPerPass) {
    const bool valid = r < n;
    CpAsync16(dst + r * LDH + c, src + (valid ? r : 0) * stride + c, valid);
  }
}

// Kernel 0: rq and rk (1 / sqrt(sum x^2 + 1e-6) of each q and k row of each key head, or 1
// without the L2 norm), one warp per (token, key head). The products below use the raw
// bf16 q and k and apply these in fp32.
__global__ void __launch_bounds__(kThreads)
    gdr_row_norms_kernel(const bf16_t* q, int64_t q_stride, const bf16_t* k, int64_t k_stride,
                         int64_t tokens, int hk, bool l2norm, void* ws, int hv) {
  const Workspace W = Carve(ws, tokens, hk, hv);
  const int lane = threadIdx.x % 32, h = blockIdx.y;
  const int t = blockIdx.x * (kThreads / 32) + threadIdx.x / 32;
  if (t >= tokens) return;
  float sq = 0.f, sk = 0.f;
  if (l2norm) {
    const uint2 qa = *reinterpret_cast<const uint2*>(q + t * q_stride + h * DK + lane * 4);
    const uint2 ka = *reinterpret_cast<const uint2*>(k + t * k_stride + h * DK + lane * 4);
    const float2 q0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qa.x));
    const float2 q1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qa.y));
    const float2 k0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ka.x));
    const float2 k1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ka.y));
    sq = q0.x * q0.x + q0.y * q0.y + q1.x * q1.x + q1.y * q1.y;
    sk = k0.x * k0.x + k0.y * k0.y + k1.x * k1.x + k1.y * k1.y;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
    }
  }
  if (lane == 0) {
    W.rq[int64_t{h} * tokens + t] = l2norm ? rsqrtf(sq + 1e-6f) : 1.f;
    W.rk[int64_t{h} * tokens + t] = l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
  }
}

// The document and first token of chunk `c` (over all documents' chunks); false past the end.
__device__ bool FindChunk(const int32_t* cu, int docs, int c, int* bos, int* n) {
  for (int d = 0; d < docs; ++d) {
    const int b = cu[d], e = cu[d + 1];
    const int chunks = (e - b + BT - 1) / BT;
    if (c < chunks) {
      *bos = b + c * BT;
      *n = min(BT, e - *bos);
      return true;
    }
    c -= chunks;
  }
  return false;
}

// acc[8][4] (one m16 tile x 64 columns) = X[m-tile rows] Y^T, X and Y [64][LDH] in smem.
__device__ inline void GemmRowsNt(float (&acc)[8][4], const bf16_t* x, const bf16_t* y, int mt) {
  const int lane = threadIdx.x % 32, mi = lane / 8, r8 = lane % 8;
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
    uint32_t a[4];
    Ldsm4(a, x + (mt * 16 + (lane & 15)) * LDH + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      Ldsm4(b, y + (np * 16 + (mi >> 1) * 8 + r8) * LDH + kk * 16 + (mi & 1) * 8);
      Mma(acc[2 * np], a, b[0], b[1]);
      Mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// x[0..8) *= f (bf16, 16-byte aligned).
__device__ inline void ScaleRow8(bf16_t* x, float f) {
  uint4 v = *reinterpret_cast<uint4*>(x);
  uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[e]));
    w[e] = Pack(a.x * f, a.y * f);
  }
  *reinterpret_cast<uint4*>(x) = v;
}

// T = (I + A)^-1 for strictly lower A [64][LDA] f32: thread c < 64 computes column c,
// T[i][c] = -sum_{j<i} A[i][j] T[j][c] (i > c), in registers; writes bf16 to sT [64][LDT].
__device__ inline void InvertUnitLower(const float* sA, bf16_t* sT, int c) {
  float t[BT];
#pragma unroll
  for (int i = 0; i < BT; ++i) {
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    const float4* row = reinterpret_cast<const float4*>(sA + i * LDA);
#pragma unroll
    for (int j4 = 0; j4 < i / 4; ++j4) {
      const float4 a = row[j4];
      s0 += a.x * t[4 * j4];
      s1 += a.y * t[4 * j4 + 1];
      s2 += a.z * t[4 * j4 + 2];
      s3 += a.w * t[4 * j4 + 3];
    }
#pragma unroll
    for (int j = i / 4 * 4; j < i; ++j) s0 += sA[i * LDA + j] * t[j];
    t[i] = i < c ? 0.f : (i == c ? 1.f : -((s0 + s1) + (s2 + s3)));
  }
#pragma unroll
  for (int i = 0; i < BT; ++i) sT[i * LDT + c] = __float2bfloat16(t[i]);
}

__global__ void __launch_bounds__(kThreads, 3)
    gdr_chunk_prepare_kernel(const bf16_t* q, int64_t q_stride, const bf16_t* k, int64_t k_stride,
                             const bf16_t* v, int64_t v_stride, const float* g, int64_t g_stride,
                             const float* beta, int64_t beta_stride, const int32_t* cu, int docs,
                             int64_t tokens, int hk, int hv, float scale, void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem);  // q (raw)
  float* sA = reinterpret_cast<float*>(smem);     // [64][LDA], over q once Q K^T is done
  bf16_t* sK = sQ + BT * LDH;                     // k (raw), later k^ beta exp(gc)
  bf16_t* sV = sK + BT * LDH;                     // v, later v beta
  bf16_t* sT = sV + BT * LDH;                     // [64][LDT]
  float* sG = reinterpret_cast<float*>(sT + BT * LDT);   // gc [64]
  float* sB = sG + BT;                                    // beta [64]
  float* sRq = sB + BT;                                   // rq * scale [64]
  float* sRk = sRq + BT;                                  // rk [64]
  __shared__ int s_bos, s_n;
  const int vh = blockIdx.y, group = hv / hk, kh = vh / group;
  if (threadIdx.x == 0) {
    int bos = 0, n = 0;
    if (!FindChunk(cu, docs, blockIdx.x, &bos, &n)) n = 0;
    s_bos = bos;
    s_n = n;
  }
  __syncthreads();
  const int bos = s_bos, n = s_n;
  if (n == 0) return;
  const Workspace W = Carve(ws, tokens, hk, hv);
  LoadRows128(sQ, q + bos * q_stride + kh * DK, q_stride, n);
  LoadRows128(sK, k + bos * k_stride + kh * DK, k_stride, n);
  LoadRows128(sV, v + bos * v_stride + vh * DV, v_stride, n);
  CpAsyncCommit();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  if (warp == 0) {  // gc = inclusive cumsum of g (two tokens per lane), beta
    const int r = 2 * lane;
    const float g0 = r < n ? g[(bos + r) * g_stride + vh] : 0.f;
    const float g1 = r + 1 < n ? g[(bos + r + 1) * g_stride + vh] : 0.f;
    float incl = g0 + g1;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    sG[r] = incl - g1;
    sG[r + 1] = incl;
    sB[r] = r < n ? beta[(bos + r) * beta_stride + vh] : 0.f;
    sB[r + 1] = r + 1 < n ? beta[(bos + r + 1) * beta_stride + vh] : 0.f;
  } else if (warp == 1) {
    const float* rq = W.rq + int64_t{kh} * tokens + bos;
    const float* rk = W.rk + int64_t{kh} * tokens + bos;
    for (int r = lane; r < BT; r += 32) {
      sRq[r] = r < n ? rq[r] * scale : 0.f;
      sRk[r] = r < n ? rk[r] : 0.f;
    }
  }
  CpAsyncWait<0>();
  __syncthreads();
  if (threadIdx.x < n) W.gc[int64_t{vh} * tokens + bos + threadIdx.x] = sG[threadIdx.x];
  {
    // Warps 0-3: A = K K^T rows 16 w..; warps 4-7: Aqk = Q K^T rows 16 (w - 4).. (raw
    // products, then the rows' and columns' norms)
    const int mt = warp % 4;
    const bool kk_part = warp < 4;
    float acc[8][4];
    GemmRowsNt(acc, kk_part ? sK : sQ, sK, mt);
    __syncthreads();  // q^ is read: A may overwrite it
    bf16_t* aqk = W.aqk + (int64_t{vh} * tokens + bos) * BT;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = mt * 16 + gid + 8 * h, j = nt * 8 + 2 * tig;
        const float gi = sG[i];
        const float x0 = acc[nt][2 * h] * sRk[j], x1 = acc[nt][2 * h + 1] * sRk[j + 1];
        if (kk_part) {
          const bool row = i < n;
          const float f = sB[i] * sRk[i];
          sA[i * LDA + j] = row && j < i ? f * x0 * __expf(gi - sG[j]) : 0.f;
          sA[i * LDA + j + 1] = row && j + 1 < i ? f * x1 * __expf(gi - sG[j + 1]) : 0.f;
        } else if (i < n) {
          const float f = sRq[i];
          const float y0 = j <= i ? f * x0 * __expf(gi - sG[j]) : 0.f;
          const float y1 = j + 1 <= i ? f * x1 * __expf(gi - sG[j + 1]) : 0.f;
          *reinterpret_cast<uint32_t*>(aqk + i * BT + j) = Pack(y0, y1);
        }
      }
  }
  __syncthreads();
  if (threadIdx.x < BT) {
    InvertUnitLower(sA, sT, threadIdx.x);
  } else {  // k^ beta exp(gc) = k rk beta exp(gc) and v beta, in place, 8 at a time
    for (int idx = threadIdx.x - BT; idx < BT * DK / 8; idx += kThreads - BT) {
      const int i = idx / (DK / 8), j = (idx % (DK / 8)) * 8;
      ScaleRow8(sK + i * LDH + j, sB[i] * sRk[i] * __expf(sG[i]));
      ScaleRow8(sV + i * LDH + j, sB[i]);
    }
  }
  __syncthreads();
  {
    // Warps 0-3: w = T (k beta exp(gc)) rows 16 w..; warps 4-7: u = T (v beta); 64 columns
    // per pass.
    const int mt = warp % 4, mi = lane / 8, r8 = lane % 8;
    const bf16_t* rhs = warp < 4 ? sK : sV;
    bf16_t* dst = (warp < 4 ? W.w : W.u) + (int64_t{vh} * tokens + bos) * DK;
    uint32_t a[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      Ldsm4(a[kk], sT + (mt * 16 + (lane & 15)) * LDT + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float acc[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t b[4];
          Ldsm4T(b, rhs + (kk * 16 + (mi & 1) * 8 + r8) * LDH + half * 64 + np * 16 + (mi >> 1) * 8);
          Mma(acc[2 * np], a[kk], b[0], b[1]);
          Mma(acc[2 * np + 1], a[kk], b[2], b[3]);
        }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = mt * 16 + gid + 8 * h, j = half * 64 + nt * 8 + 2 * tig;
          if (i < n)
            *reinterpret_cast<uint32_t*>(dst + i * DK + j) = Pack(acc[nt][2 * h], acc[nt][2 * h + 1]);
        }
    }
  }
}

// The operands kernel 2 reads straight from global memory into registers for the chunk at
// `bos` (n rows): u (P warps, accumulator layout of rows i0 / i1, 32 columns from v0) or the
// masked Q K^T (R warps, A fragments of rows i0 / i1); rows >= n are zero.
__device__ inline void LoadChunkRegs(uint32_t (&reg)[4][4], bool p_part, const Workspace& W,
                                     int64_t row0, int n, int v0, int i0, int i1) {
  const int tig = threadIdx.x % 4;
  if (p_part) {
    const bf16_t* u = W.u + row0 * DV + v0;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int j = nt * 8 + 2 * tig;
      reg[nt][0] = i0 < n ? *reinterpret_cast<const uint32_t*>(u + i0 * DV + j) : 0u;
      reg[nt][1] = i1 < n ? *reinterpret_cast<const uint32_t*>(u + i1 * DV + j) : 0u;
    }
  } else {
    const bf16_t* aqk = W.aqk + row0 * BT;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int j = kk * 16 + 2 * tig;
      reg[kk][0] = i0 < n ? *reinterpret_cast<const uint32_t*>(aqk + i0 * BT + j) : 0u;
      reg[kk][1] = i1 < n ? *reinterpret_cast<const uint32_t*>(aqk + i1 * BT + j) : 0u;
      reg[kk][2] = i0 < n ? *reinterpret_cast<const uint32_t*>(aqk + i0 * BT + j + 8) : 0u;
      reg[kk][3] = i1 < n ? *reinterpret_cast<const uint32_t*>(aqk + i1 * BT + j + 8) : 0u;
    }
  }
}

// [P; R] = [w; q^] S for this warp's m-tile: pr[4][4] over 32 columns, K = dk.
__device__ inline void GemmStateRows(float (&pr)[4][4], const bf16_t* x, const bf16_t* sS,
                                     int mt) {
  const int lane = threadIdx.x % 32, mi = lane / 8, r8 = lane % 8;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) pr[nt][0] = pr[nt][1] = pr[nt][2] = pr[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
    uint32_t a[4];
    Ldsm4(a, x + (mt * 16 + (lane & 15)) * LDH + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      uint32_t b[4];
      Ldsm4T(b, sS + (kk * 16 + (mi & 1) * 8 + r8) * LDS + np * 16 + (mi >> 1) * 8);
      Mma(pr[2 * np], a, b[0], b[1]);
      Mma(pr[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Chunk pipeline of kernel 2 (cp.async groups): w and q^ of chunk c + 1 are issued once the
// products of chunk c have read them (B1), k^ of c + 1 after the state update (B2); the
// top of a chunk waits for w and q^ only, k^ is awaited just before the update. u, the
// masked Q K^T and gc for chunk c + 1 are loaded into registers right after their last use.
__global__ void __launch_bounds__(kThreads, 3)
    gdr_chunk_state_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                           int64_t q_stride, const bf16_t* k, int64_t k_stride, const int32_t* cu,
                           int64_t tokens, int hk, int hv, float scale, const void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sS = reinterpret_cast<bf16_t*>(smem);  // [128][LDS] bf16 state slice
  bf16_t* sW = sS + DK * LDS;                     // [64][LDH] w
  bf16_t* sQ = sW + BT * LDH;                     // [64][LDH] q (raw)
  bf16_t* sK = sQ + BT * LDH;                     // [64][LDH] k (raw)
  bf16_t* sVn = sK + BT * LDH;                    // [64][LDS] v'
  bf16_t* sVd = sVn + BT * LDS;                   // [64][LDS] exp(gc_last - gc) v'
  // One flat grid dimension (x has no 65535 limit, so any number of documents): the dv
  // slices of one (document, head) are neighbours, and share w, q and k in L2.
  constexpr int kSlices = DV / BV;
  const int v0 = static_cast<int>(blockIdx.x % kSlices) * BV;
  const int vh = static_cast<int>(blockIdx.x / kSlices % hv);
  const int doc = static_cast<int>(blockIdx.x / kSlices / hv), kh = vh / (hv / hk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8, mt = warp % 4;
  const int i0 = mt * 16 + gid, i1 = i0 + 8;  // this lane's two rows of a chunk
  const bool p_part = warp < 4;  // P = w S and v' (else R = q^ S and o)
  const Workspace W = Carve(const_cast<void*>(ws), tokens, hk, hv);
  // Per-row scales of this lane's rows: rk (P warps: k^ = k rk folds into the decayed v') or
  // rq * scale (R warps: q^ = q rq scale).
  const float* rrow = (p_part ? W.rk : W.rq) + int64_t{kh} * tokens;
  const float rscale = p_part ? 1.f : scale;
  const int begin = cu[doc], end = cu[doc + 1];
  const int64_t vrow = int64_t{vh} * tokens;
  if (begin >= end) return;

  float S[4][4];  // state rows 16 warp .. (dk), 32 columns (4 n8 tiles)
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) S[nt][0] = S[nt][1] = S[nt][2] = S[nt][3] = 0.f;
  for (int idx = threadIdx.x; idx < DK * LDS / 2; idx += kThreads)
    reinterpret_cast<uint32_t*>(sS)[idx] = 0u;
  uint32_t reg[4][4];
  float gc0, gc1, gl, r0, r1;
  const auto load_scalars = [&](int at, int rows) {
    const float* gcp = W.gc + vrow + at;
    gc0 = i0 < rows ? gcp[i0] : 0.f;
    gc1 = i1 < rows ? gcp[i1] : 0.f;
    gl = gcp[rows - 1];
    r0 = i0 < rows ? rrow[at + i0] * rscale : 0.f;
    r1 = i1 < rows ? rrow[at + i1] * rscale : 0.f;
  };
  const bf16_t* qh = q + kh * DK;
  const bf16_t* kh_rows = k + kh * DK;
  {
    const int n = min(BT, end - begin);
    LoadRows128(sW, W.w + (vrow + begin) * DK, DK, n);
    LoadRows128(sQ, qh + begin * q_stride, q_stride, n);
    CpAsyncCommit();
    LoadRows128(sK, kh_rows + begin * k_stride, k_stride, n);
    CpAsyncCommit();
    LoadChunkRegs(reg, p_part, W, vrow + begin, n, v0, i0, i1);
    load_scalars(begin, n);
  }
  for (int bos = begin; bos < end; bos += BT) {
    const int n = min(BT, end - bos), next = bos + BT;
    const int nn = min(BT, end - next);  // rows of the next chunk (<= 0: none)
    CpAsyncWait<1>();
    __syncthreads();  // B0: w and q^ of this chunk and the state copy are in smem
    float pr[4][4];
    GemmStateRows(pr, p_part ? sW : sQ, sS, mt);
    if (p_part) {  // v' = u - P, and its decayed copy, to smem as bf16
      const float d0 = __expf(gl - gc0) * r0, d1 = __expf(gl - gc1) * r1;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int j = nt * 8 + 2 * tig;
        const float2 u0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&reg[nt][0]));
        const float2 u1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&reg[nt][1]));
        const float a0 = u0.x - pr[nt][0], a1 = u0.y - pr[nt][1];
        const float b0 = u1.x - pr[nt][2], b1 = u1.y - pr[nt][3];
        *reinterpret_cast<uint32_t*>(sVn + i0 * LDS + j) = Pack(a0, a1);
        *reinterpret_cast<uint32_t*>(sVn + i1 * LDS + j) = Pack(b0, b1);
        *reinterpret_cast<uint32_t*>(sVd + i0 * LDS + j) = Pack(a0 * d0, a1 * d0);
        *reinterpret_cast<uint32_t*>(sVd + i1 * LDS + j) = Pack(b0 * d1, b1 * d1);
      }
      if (nn > 0) LoadChunkRegs(reg, true, W, vrow + next, nn, v0, i0, i1);
    } else {  // o = exp(gc) R, Aqk v' added after B1
      const float e0 = __expf(gc0) * r0, e1 = __expf(gc1) * r1;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        pr[nt][0] *= e0;
        pr[nt][1] *= e0;
        pr[nt][2] *= e1;
        pr[nt][3] *= e1;
      }
    }
    CpAsyncWait<0>();
    __syncthreads();  // B1: v' and k^ are in smem; w, q^ and the state copy are read
    if (nn > 0) {
      LoadRows128(sW, W.w + (vrow + next) * DK, DK, nn);
      LoadRows128(sQ, qh + next * q_stride, q_stride, nn);
      CpAsyncCommit();
    }
    if (!p_part) {  // o += Aqk v', then out
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t b[4];
          Ldsm4T(b, sVn + (kk * 16 + (mi & 1) * 8 + r8) * LDS + np * 16 + (mi >> 1) * 8);
          Mma(pr[2 * np], reg[kk], b[0], b[1]);
          Mma(pr[2 * np + 1], reg[kk], b[2], b[3]);
        }
      if (nn > 0) LoadChunkRegs(reg, false, W, vrow + next, nn, v0, i0, i1);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = h == 0 ? i0 : i1;
          if (i >= n) continue;
          const int64_t o = (bos + i) * out_stride + vh * DV + v0 + nt * 8 + 2 * tig;
          if (out_f32)
            *reinterpret_cast<float2*>(static_cast<float*>(out) + o) =
                make_float2(pr[nt][2 * h], pr[nt][2 * h + 1]);
          else
            *reinterpret_cast<uint32_t*>(static_cast<bf16_t*>(out) + o) =
                Pack(pr[nt][2 * h], pr[nt][2 * h + 1]);
        }
    }
    // S = exp(gc_last) S + k^^T (exp(gc_last - gc) v'): rows 16 warp .. of dk, K = tokens.
    const float decay = __expf(gl);
    if (nn > 0) load_scalars(next, nn);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] *= decay;
#pragma unroll
    for (int kk = 0; kk < BT / 16; ++kk) {
      uint32_t a[4];
      Ldsm4T(a, sK + (kk * 16 + (mi >> 1) * 8 + r8) * LDH + warp * 16 + (mi & 1) * 8);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t b[4];
        Ldsm4T(b, sVd + (kk * 16 + (mi & 1) * 8 + r8) * LDS + np * 16 + (mi >> 1) * 8);
        Mma(S[2 * np], a, b[0], b[1]);
        Mma(S[2 * np + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int r = warp * 16 + gid, j = nt * 8 + 2 * tig;
      *reinterpret_cast<uint32_t*>(sS + r * LDS + j) = Pack(S[nt][0], S[nt][1]);
      *reinterpret_cast<uint32_t*>(sS + (r + 8) * LDS + j) = Pack(S[nt][2], S[nt][3]);
    }
    __syncthreads();  // B2: k^ and v' are read; the new state copy is in smem
    if (nn > 0) LoadRows128(sK, kh_rows + next * k_stride, k_stride, nn);
    CpAsyncCommit();  // (an empty group on the last chunk keeps the wait counts in step)
  }
}

constexpr size_t kPrepareSmem = 3 * BT * LDH * 2 + BT * LDT * 2 + 4 * BT * 4;
static_assert(BT * LDA * 4 <= BT * LDH * 2, "A fits over q");
static_assert(kPrepareSmem * 3 + 3 * 1024 <= 228 * 1024, "three prepare blocks per SM");
constexpr size_t kStateSmem = DK * LDS * 2 + 3 * BT * LDH * 2 + 2 * BT * LDS * 2;
static_assert(kStateSmem * 3 + 3 * 1024 <= 228 * 1024, "three state blocks per SM");

}  // namespace

cudaError_t LaunchGatedDeltaRuleChunked(void* out, int64_t out_stride, bool out_f32,
                                        const void* q, int64_t q_stride, const void* k,
                                        int64_t k_stride, const void* v, int64_t v_stride,
                                        const float* g, int64_t g_stride, const float* beta,
                                        int64_t beta_stride, const int32_t* cu, int docs,
                                        int64_t tokens, int hk, int hv, bool l2norm, float scale,
                                        void* workspace, Stream s, int stages) {
  const auto stream = static_cast<cudaStream_t>(s);
  // The opt-in to > 48 KiB of shared memory (per device, so at every launch).
  cudaError_t e = cudaFuncSetAttribute(gdr_chunk_prepare_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kPrepareSmem));
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(gdr_chunk_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kStateSmem));
  if (e != cudaSuccess) return e;
  gdr_row_norms_kernel<<<dim3(static_cast<unsigned>((tokens + 7) / 8), hk), kThreads, 0,
                         stream>>>(static_cast<const bf16_t*>(q), q_stride,
                                                static_cast<const bf16_t*>(k), k_stride, tokens,
                                                hk, l2norm, workspace, hv);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int max_chunks = static_cast<int>((tokens + BT - 1) / BT) + docs;
  gdr_chunk_prepare_kernel<<<dim3(max_chunks, hv), kThreads, kPrepareSmem, stream>>>(
      static_cast<const bf16_t*>(q), q_stride, static_cast<const bf16_t*>(k), k_stride,
      static_cast<const bf16_t*>(v), v_stride, g, g_stride, beta, beta_stride, cu, docs, tokens,
      hk, hv, scale, workspace);
  e = cudaGetLastError();
  if (e != cudaSuccess || stages < 2) return e;
  gdr_chunk_state_kernel<<<static_cast<unsigned>(docs) * hv * (DV / BV), kThreads, kStateSmem,
                           stream>>>(
      out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
      static_cast<const bf16_t*>(k), k_stride, cu, tokens, hk, hv, scale, workspace);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
