// CUDA chunked gated delta rule (gated_delta_rule_chunked.h): chunk 64, dk = dv = 128, bf16
// tensor-core products (mma.sync m16n8k16, fp32 accumulation; kernels/core/ptx.cuh).
//
// Kernel 1, "prepare", one block per (chunk, value head), 8 warps, chunk-parallel: loads the
// chunk's q, k, v, g, beta; L2-normalises q (times the scale) and k, rounded to bf16 as fla
// does, and writes them once per key head (the group's first value head); gc = cumsum(g);
// K K^T and Q K^T on tensor cores (one m-tile per warp); A = strictly-lower
// beta_i (k_i.k_j) exp(gc_i - gc_j) to shared memory and the masked decayed Q K^T (Aqk) to
// the workspace; T = (I + A)^-1 by forward substitution with one thread per column of T, the
// column in registers (no barriers), while the other warps form k beta exp(gc) and v beta;
// then w = T (k beta exp(gc)) and u = T (v beta) on tensor cores, written as bf16.
// Kernel 2, "state", one block per (32-wide slice of dv, value head, document), 8 warps,
// three per SM: the state slice S [128, 32] lives in fp32 accumulators (warp i: dk rows
// 16i..), a bf16 copy in shared memory feeds the products. Per chunk in order:
//   [P; R] = [w; q^] S (warps 0-3: P, warps 4-7: R), v' = u - P (warps 0-3, u read straight
//   into accumulator layout), o = exp(gc) R + Aqk v' (warps 4-7, Aqk read straight into A
//   fragments), S = exp(gc_last) S + k^^T (exp(gc_last - gc) v').
// w and q^ for the next chunk are loaded (cp.async) as soon as the products have read them,
// k^ after the state update, so the loads overlap the chunk's remaining work.
#include <cuda_bf16.h>

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
  bf16_t* qn;   // [hk][T][DK]  normalised q times the scale
  bf16_t* kn;   // [hk][T][DK]  normalised k
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
  p.qn = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hk} * t * DK * 2);
  p.kn = reinterpret_cast<bf16_t*>(b);
  b += Align256(int64_t{hk} * t * DK * 2);
  p.gc = reinterpret_cast<float*>(b);
  return p;
}

// Async copy of rows [0, n) of a [*, 128] bf16 matrix (row pitch `stride` elements) to smem
// rows of pitch LDH; rows [n, 64) are zero-filled.
__device__ inline void LoadRows128(bf16_t* dst, const bf16_t* src, int64_t stride, int n) {
  for (int idx = threadIdx.x; idx < BT * (DK / 8); idx += kThreads) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    const bool valid = r < n;
    CpAsync16(dst + r * LDH + c, src + (valid ? r : 0) * stride + c, valid);
  }
}

// Copies smem rows [0, n) (pitch LDH) to a dense [*, 128] global matrix; 16-byte vectors.
__device__ inline void StoreRows128(bf16_t* dst, const bf16_t* src, int n) {
  for (int idx = threadIdx.x; idx < n * (DK / 8); idx += kThreads) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    *reinterpret_cast<uint4*>(dst + r * DK + c) = *reinterpret_cast<const uint4*>(src + r * LDH + c);
  }
}

// In place: each row x (of 128, pitch LDH) becomes x * rsqrt(sum x^2 + 1e-6) * scale (when
// l2), else x * scale. One warp per row.
__device__ inline void NormalizeRows(bf16_t* x, bool l2, float scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < BT; r += kThreads / 32) {
    __nv_bfloat162* row = reinterpret_cast<__nv_bfloat162*>(x + r * LDH + lane * 4);
    const float2 a = __bfloat1622float2(row[0]), b = __bfloat1622float2(row[1]);
    float ss = a.x * a.x + a.y * a.y + b.x * b.x + b.y * b.y;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float f = (l2 ? rsqrtf(ss + 1e-6f) : 1.f) * scale;
    row[0] = __floats2bfloat162_rn(a.x * f, a.y * f);
    row[1] = __floats2bfloat162_rn(b.x * f, b.y * f);
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

__global__ void __launch_bounds__(kThreads, 2)
    gdr_chunk_prepare_kernel(const bf16_t* q, int64_t q_stride, const bf16_t* k, int64_t k_stride,
                             const bf16_t* v, int64_t v_stride, const float* g, int64_t g_stride,
                             const float* beta, int64_t beta_stride, const int32_t* cu, int docs,
                             int64_t tokens, int hk, int hv, bool l2norm, float scale, void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem);  // q^, later k^ beta exp(gc)
  bf16_t* sK = sQ + BT * LDH;                     // k^
  bf16_t* sV = sK + BT * LDH;                     // v, later v beta
  float* sA = reinterpret_cast<float*>(sV + BT * LDH);  // [64][LDA]
  bf16_t* sT = reinterpret_cast<bf16_t*>(sA + BT * LDA);  // [64][LDT]
  float* sG = reinterpret_cast<float*>(sT + BT * LDT);   // gc [64]
  float* sB = sG + BT;                                    // beta [64]
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
  }
  CpAsyncWait<0>();
  __syncthreads();
  NormalizeRows(sQ, l2norm, scale);
  NormalizeRows(sK, l2norm, 1.f);
  __syncthreads();
  if (vh % group == 0) {
    StoreRows128(W.qn + (int64_t{kh} * tokens + bos) * DK, sQ, n);
    StoreRows128(W.kn + (int64_t{kh} * tokens + bos) * DK, sK, n);
  }
  if (threadIdx.x < n) W.gc[int64_t{vh} * tokens + bos + threadIdx.x] = sG[threadIdx.x];
  {
    // Warps 0-3: A = K K^T rows 16 w..; warps 4-7: Aqk = Q K^T rows 16 (w - 4)..
    const int mt = warp % 4;
    const bool kk_part = warp < 4;
    float acc[8][4];
    GemmRowsNt(acc, kk_part ? sK : sQ, sK, mt);
    bf16_t* aqk = W.aqk + (int64_t{vh} * tokens + bos) * BT;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = mt * 16 + gid + 8 * h, j = nt * 8 + 2 * tig;
        const float gi = sG[i];
        const float x0 = acc[nt][2 * h], x1 = acc[nt][2 * h + 1];
        if (kk_part) {
          const bool row = i < n;
          sA[i * LDA + j] = row && j < i ? sB[i] * x0 * __expf(gi - sG[j]) : 0.f;
          sA[i * LDA + j + 1] = row && j + 1 < i ? sB[i] * x1 * __expf(gi - sG[j + 1]) : 0.f;
        } else if (i < n) {
          const float y0 = j <= i ? x0 * __expf(gi - sG[j]) : 0.f;
          const float y1 = j + 1 <= i ? x1 * __expf(gi - sG[j + 1]) : 0.f;
          *reinterpret_cast<uint32_t*>(aqk + i * BT + j) = Pack(y0, y1);
        }
      }
  }
  __syncthreads();
  if (threadIdx.x < BT) {
    InvertUnitLower(sA, sT, threadIdx.x);
  } else {  // k^ beta exp(gc) into sQ (q^ is stored), v beta in place
    for (int idx = threadIdx.x - BT; idx < BT * DK / 2; idx += kThreads - BT) {
      const int i = idx / (DK / 2), j = (idx % (DK / 2)) * 2;
      const float bk = sB[i] * __expf(sG[i]);
      const float2 kx = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(sK + i * LDH + j));
      const float2 vx = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(sV + i * LDH + j));
      *reinterpret_cast<__nv_bfloat162*>(sQ + i * LDH + j) =
          __floats2bfloat162_rn(kx.x * bk, kx.y * bk);
      *reinterpret_cast<__nv_bfloat162*>(sV + i * LDH + j) =
          __floats2bfloat162_rn(vx.x * sB[i], vx.y * sB[i]);
    }
  }
  __syncthreads();
  {
    // Warps 0-3: w = T (k beta exp(gc)) rows 16 w..; warps 4-7: u = T (v beta); 64 columns
    // per pass.
    const int mt = warp % 4, mi = lane / 8, r8 = lane % 8;
    const bf16_t* rhs = warp < 4 ? sQ : sV;
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

__global__ void __launch_bounds__(kThreads, 3)
    gdr_chunk_state_kernel(void* out, int64_t out_stride, bool out_f32, const int32_t* cu,
                           int64_t tokens, int hk, int hv, const void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sS = reinterpret_cast<bf16_t*>(smem);  // [128][LDS] bf16 state slice
  bf16_t* sW = sS + DK * LDS;                     // [64][LDH] w
  bf16_t* sQ = sW + BT * LDH;                     // [64][LDH] q^
  bf16_t* sK = sQ + BT * LDH;                     // [64][LDH] k^
  bf16_t* sVn = sK + BT * LDH;                    // [64][LDS] v'
  bf16_t* sVd = sVn + BT * LDS;                   // [64][LDS] exp(gc_last - gc) v'
  const int v0 = blockIdx.x * BV, vh = blockIdx.y, doc = blockIdx.z, kh = vh / (hv / hk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int mi = lane / 8, r8 = lane % 8, mt = warp % 4;
  const bool p_part = warp < 4;  // P = w S and v' (else R = q^ S and o)
  const Workspace W = Carve(const_cast<void*>(ws), tokens, hk, hv);
  const int begin = cu[doc], end = cu[doc + 1];
  const int64_t vrow = int64_t{vh} * tokens, krow = int64_t{kh} * tokens;

  float S[4][4];  // state rows 16 warp .. (dk), 32 columns (4 n8 tiles)
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) S[nt][0] = S[nt][1] = S[nt][2] = S[nt][3] = 0.f;
  for (int idx = threadIdx.x; idx < DK * LDS / 2; idx += kThreads)
    reinterpret_cast<uint32_t*>(sS)[idx] = 0u;
  if (begin < end) {
    const int n = min(BT, end - begin);
    LoadRows128(sW, W.w + (vrow + begin) * DK, DK, n);
    LoadRows128(sQ, W.qn + (krow + begin) * DK, DK, n);
    LoadRows128(sK, W.kn + (krow + begin) * DK, DK, n);
    CpAsyncCommit();
  }
  for (int bos = begin; bos < end; bos += BT) {
    const int n = min(BT, end - bos);
    const int i0 = mt * 16 + gid, i1 = i0 + 8;  // this lane's two rows of the chunk
    const float* gcp = W.gc + vrow + bos;
    const float gc0 = i0 < n ? gcp[i0] : 0.f, gc1 = i1 < n ? gcp[i1] : 0.f, gl = gcp[n - 1];
    // Operands read straight from global memory into registers: u (P warps, accumulator
    // layout) or Aqk (R warps, A fragments).
    uint32_t reg[4][4];
    if (p_part) {
      const bf16_t* u = W.u + (vrow + bos) * DV + v0;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int j = nt * 8 + 2 * tig;
        reg[nt][0] = i0 < n ? *reinterpret_cast<const uint32_t*>(u + i0 * DV + j) : 0u;
        reg[nt][1] = i1 < n ? *reinterpret_cast<const uint32_t*>(u + i1 * DV + j) : 0u;
      }
    } else {
      const bf16_t* aqk = W.aqk + (vrow + bos) * BT;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int j = kk * 16 + 2 * tig;
        reg[kk][0] = i0 < n ? *reinterpret_cast<const uint32_t*>(aqk + i0 * BT + j) : 0u;
        reg[kk][1] = i1 < n ? *reinterpret_cast<const uint32_t*>(aqk + i1 * BT + j) : 0u;
        reg[kk][2] = i0 < n ? *reinterpret_cast<const uint32_t*>(aqk + i0 * BT + j + 8) : 0u;
        reg[kk][3] = i1 < n ? *reinterpret_cast<const uint32_t*>(aqk + i1 * BT + j + 8) : 0u;
      }
    }
    CpAsyncWait<0>();
    __syncthreads();  // B0: w, q^, k^ of this chunk and the state copy are in smem
    // [P; R] = [w; q^] S: this warp's m-tile, 4 n8 tiles, K = dk.
    float pr[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) pr[nt][0] = pr[nt][1] = pr[nt][2] = pr[nt][3] = 0.f;
    const bf16_t* x = p_part ? sW : sQ;
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
    if (p_part) {  // v' = u - P, and its decayed copy, to smem as bf16
      const float d0 = __expf(gl - gc0), d1 = __expf(gl - gc1);
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
    } else {  // o = exp(gc) R, Aqk v' added after B1
      const float e0 = __expf(gc0), e1 = __expf(gc1);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        pr[nt][0] *= e0;
        pr[nt][1] *= e0;
        pr[nt][2] *= e1;
        pr[nt][3] *= e1;
      }
    }
    __syncthreads();  // B1: v' is in smem; w, q^ and the state copy are read
    const int next = bos + BT;
    if (next < end) {
      const int nn = min(BT, end - next);
      LoadRows128(sW, W.w + (vrow + next) * DK, DK, nn);
      LoadRows128(sQ, W.qn + (krow + next) * DK, DK, nn);
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
    if (next < end) {
      LoadRows128(sK, W.kn + (krow + next) * DK, DK, min(BT, end - next));
      CpAsyncCommit();
    }
  }
}

constexpr size_t kPrepareSmem =
    3 * BT * LDH * 2 + BT * LDA * 4 + BT * LDT * 2 + 2 * BT * 4;
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
  const int max_chunks = static_cast<int>((tokens + BT - 1) / BT) + docs;
  gdr_chunk_prepare_kernel<<<dim3(max_chunks, hv), kThreads, kPrepareSmem, stream>>>(
      static_cast<const bf16_t*>(q), q_stride, static_cast<const bf16_t*>(k), k_stride,
      static_cast<const bf16_t*>(v), v_stride, g, g_stride, beta, beta_stride, cu, docs, tokens,
      hk, hv, l2norm, scale, workspace);
  e = cudaGetLastError();
  if (e != cudaSuccess || stages < 2) return e;
  gdr_chunk_state_kernel<<<dim3(DV / BV, hv, docs), kThreads, kStateSmem, stream>>>(
      out, out_stride, out_f32, cu, tokens, hk, hv, workspace);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
