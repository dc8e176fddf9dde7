// CUDA chunked gated delta rule (gated_delta_rule_chunked.h): chunk 64, dk = dv = 128, bf16
// tensor-core products (mma.sync m16n8k16, fp32 accumulation; kernels/core/ptx.cuh).
//
// The products use the raw bf16 q and k and apply their inverse L2 norms rq, rk (and q's
// scale) in fp32, so q^ and k^ are never written: k^.k^ = (k.k) rk rk, q^ S = (q S) rq scale,
// k^^T x = k^T (rk x).
// Kernel 1, "prepare", one block per (chunk of 64, key head, group of up to three of the
// key head's value heads), 8 warps, three per SM, chunk-parallel: warp 0 finds the chunk's
// document (a scan over the documents' chunk counts); loads the chunk's q and k once and each
// value head's g and beta; computes rq and rk of the chunk's rows (also written to the
// workspace for kernel 2) and gc = cumsum(g); K K^T and Q K^T on tensor cores once for all
// the value heads (one m-tile per warp, the raw products stay in registers); then per value
// head A = strictly-lower beta_i (k^_i.k^_j) exp(gc_i - gc_j) to shared memory (over q and k,
// which are done) and the masked decayed Q^ K^^T (Aqk) to the workspace (branch-free masks);
// T = (I + A)^-1 in 32 x 32 blocks, all f32: the diagonal blocks by forward substitution, one
// thread per column in registers (two warps per value head, the heads at once), then
// T21 = -T22 (A21 T11) by all threads (the single 64-column substitution was a 2016-FMA chain
// per thread that the whole block waited on). Tb = T diag(beta) goes to the workspace as bf16
// (lower triangular, its upper right block written as zeros). Neither w = T diag(beta
// exp(gc)) k^ nor u = T diag(beta) v of the WY form is formed: kernel 2 applies Tb instead,
// which saves writing and reading both (kernel 1 never reads v).
// Kernel 2, "state", one block per (64-wide half of dv, value head, document), 4 warps,
// three per SM: each warp keeps S^T for its 16 dv columns and all of dk in fp32 accumulators
// (nothing of the state goes through shared memory) and per chunk in order computes
//   P^T = S^T k^T and R = q^ S (the packed S^T is the A operand of one and the B operand of
//   the other), X^T = v^T - P^T diag(rk exp(gc)), v'^T = X^T Tb^T (so that
//   v' = Tb (v - exp(gc) k^ S) = u - w S), S^T = exp(gc_last) S^T + (exp(gc_last - gc) v')^T k^
//   (the scaled v'^T is the A operand), o = exp(gc) R + Aqk v' (v'^T is Aqk v''s B operand).
// The loads of chunk c + 1 are issued as soon as chunk c has read their buffers (see the
// pipeline comment at kernel 2, gated_delta_rule_chunked_state.cu). Shared constants, the
// workspace layout and the row loader: gated_delta_rule_chunked_device.cuh.
#include "kernels/linear_attention/gated_delta_rule_chunked_device.cuh"
#include "kernels/linear_attention/gated_delta_rule_chunked_kernels.h"

namespace tandem::kernels {
namespace {

using namespace gdr_internal;  // NOLINT: the tile constants and helpers of this kernel family

constexpr int kHeadsPerBlock = 3;  // value heads per kernel 1 block

// The first token and row count of chunk `c` (over all documents' chunks), by one warp: each
// lane takes a document of a group of 32, a scan of their chunk counts finds the one that
// holds chunk c. The result is in every lane; false past the end.
__device__ bool FindChunk(const int32_t* cu, int docs, int c, int* bos, int* n) {
  const int lane = threadIdx.x % 32;
  int before = 0;  // chunks of the documents before this group
  for (int d0 = 0; d0 < docs; d0 += 32) {
    const int d = d0 + lane;
    const int b = d < docs ? cu[d] : 0, e = d < docs ? cu[d + 1] : 0;
    const int chunks = (e - b + BT - 1) / BT;
    int incl = chunks;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    const int first = before + incl - chunks;  // this document's first chunk
    const unsigned hit = __ballot_sync(0xffffffffu, c >= first && c < first + chunks);
    if (hit != 0) {
      const int src = __ffs(hit) - 1;
      const int start = __shfl_sync(0xffffffffu, b + (c - first) * BT, src);
      *bos = start;
      *n = min(BT, __shfl_sync(0xffffffffu, e, src) - start);
      return true;
    }
    before += __shfl_sync(0xffffffffu, incl, 31);
  }
  return false;
}

// acc[8][4] (one m16 tile x 64 columns) = X[m-tile rows] Y^T, X and Y [64][LDH] in smem;
// only the columns < 16 (mt + 1) (both masks keep j <= i), the rest left zero.
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
      if (np > mt) break;
      uint32_t b[4];
      Ldsm4(b, y + (np * 16 + (mi >> 1) * 8 + r8) * LDH + kk * 16 + (mi & 1) * 8);
      Mma(acc[2 * np], a, b[0], b[1]);
      Mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// 2^x with denormal results flushed to zero (one MUFU op).
__device__ inline float Ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Warps 0-3 (kk_part): A = strictly lower beta_i (k^_i.k^_j) exp(gc_i - gc_j) rows 16 mt..
// to sA (f32); warps 4-7: the masked decayed Q^ K^^T rows 16 mt.. (rows < n) to aqk (bf16),
// from the raw products in acc; the rows' factors are zero past n (sB, sRq).
__device__ inline void MaskProducts(const float (&acc)[8][4], bool kk_part, int mt, int n,
                                    const float* sG, const float* sB, const float* sRq,
                                    const float* sRk, float* sA, bf16_t* aqk) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  float gj[16], rj[16];  // this lane's columns: gc log2(e) and rk
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float2 g2 = *reinterpret_cast<const float2*>(sG + nt * 8 + 2 * tig);
    const float2 r2 = *reinterpret_cast<const float2*>(sRk + nt * 8 + 2 * tig);
    gj[2 * nt] = g2.x * kLog2e;
    gj[2 * nt + 1] = g2.y * kLog2e;
    rj[2 * nt] = r2.x;
    rj[2 * nt + 1] = r2.y;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = mt * 16 + gid + 8 * h;
    const float gi = sG[i] * kLog2e;
    const float f = kk_part ? sB[i] * sRk[i] : sRq[i];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      float y[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = nt * 8 + 2 * tig + e;
        const float x = acc[nt][2 * h + e] * rj[2 * nt + e] * f;
        const float d = Ex2(gi - gj[2 * nt + e]);  // may be inf above the diagonal: not used
        y[e] = (kk_part ? j < i : j <= i) ? x * d : 0.f;
      }
      if (kk_part)
        *reinterpret_cast<float2*>(sA + i * LDA + nt * 8 + 2 * tig) = make_float2(y[0], y[1]);
      else if (i < n)
        *reinterpret_cast<uint32_t*>(aqk + i * BT + nt * 8 + 2 * tig) = Pack(y[0], y[1]);
    }
  }
}

// T = (I + A)^-1 for strictly lower A [64][LDA] f32 in 32 x 32 blocks:
//   T = [T11 0; T21 T22], T11 = (I + A11)^-1, T22 = (I + A22)^-1, T21 = -T22 (A21 T11).
// Tb = T diag(beta) goes to `tb` (bf16 rows of BT, rows < n only).
// Step 1 (64 threads, c = 0..63, lane c % 32 of warp c / 32 of the two that take this head):
// the column c % 32 of T11 (c < 32) or T22 by forward substitution in registers, written in
// f32 over its own block of sA (the warp has read all of it) and times beta_c to tb.
__device__ inline void InvertDiagonalBlock(float* sA, bf16_t* tb, int c, float beta_c, int n) {
  constexpr int kN = BT / 2;
  const int lane = c % kN, base = c - lane;  // this warp's block starts at row / column base
  const float* blk = sA + base * LDA + base;
  float t[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    const float4* row = reinterpret_cast<const float4*>(blk + i * LDA);
#pragma unroll
    for (int j4 = 0; j4 < i / 4; ++j4) {
      const float4 a = row[j4];
      s0 += a.x * t[4 * j4];
      s1 += a.y * t[4 * j4 + 1];
      s2 += a.z * t[4 * j4 + 2];
      s3 += a.w * t[4 * j4 + 3];
    }
#pragma unroll
    for (int j = i / 4 * 4; j < i; ++j) s0 += blk[i * LDA + j] * t[j];
    t[i] = i < lane ? 0.f : (i == lane ? 1.f : -((s0 + s1) + (s2 + s3)));
  }
  __syncwarp();  // every lane has read the block: overwrite it with T11 / T22
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    sA[(base + i) * LDA + c] = t[i];
    if (base + i < n) tb[(base + i) * BT + c] = __float2bfloat16(t[i] * beta_c);
  }
}

// Step 2 (all threads; warp g, lane c: rows 4g..4g+3 of a 32 x 32 block, column c):
// Y = A21 T11 into sA's unused upper right block (rows 0-31, columns 32-63). Threads < 128
// also write zeros to tb's upper right block (rows < n).
__device__ inline void InvertMergeY(float* sA, bf16_t* tb, int n) {
  const int c = threadIdx.x % 32, r0 = threadIdx.x / 32 * 4;
  float y[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int j4 = 0; j4 < BT / 8; ++j4) {
    float tc[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) tc[e] = sA[(4 * j4 + e) * LDA + c];  // T11[j][c]
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float4 a = *reinterpret_cast<const float4*>(sA + (32 + r0 + r) * LDA + 4 * j4);
      y[r] += a.x * tc[0] + a.y * tc[1] + a.z * tc[2] + a.w * tc[3];
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) sA[(r0 + r) * LDA + 32 + c] = y[r];
  const int zr = threadIdx.x / 4;  // 16 bytes of zeros per thread: row zr, columns 32 + 8 (t % 4)
  if (zr < BT / 2 && zr < n)
    *reinterpret_cast<uint4*>(tb + zr * BT + BT / 2 + threadIdx.x % 4 * 8) = make_uint4(0, 0, 0, 0);
}

// Step 3: T21 = -T22 Y (T22 lower triangular with its unit diagonal stored), times column c's
// beta to tb (rows < n).
__device__ inline void InvertMergeT21(const float* sA, bf16_t* tb, float beta_c, int n) {
  const int c = threadIdx.x % 32, g = threadIdx.x / 32, r0 = g * 4;
  float x[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k4 = 0; k4 <= g; ++k4) {  // T22[r][k] = 0 for k > r
    float yc[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) yc[e] = sA[(4 * k4 + e) * LDA + 32 + c];  // Y[k][c]
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float4 a = *reinterpret_cast<const float4*>(sA + (32 + r0 + r) * LDA + 32 + 4 * k4);
      x[r] += a.x * yc[0] + a.y * yc[1] + a.z * yc[2] + a.w * yc[3];
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r)
    if (32 + r0 + r < n) tb[(32 + r0 + r) * BT + c] = __float2bfloat16(-x[r] * beta_c);
}

// One warp: gc = the inclusive cumsum of g over the chunk's n tokens from `bos` (two per
// lane) into sG, and beta into sB, for value head vh (zeros past n).
__device__ __forceinline__ void LoadGates(const float* g, int64_t g_stride, const float* beta,
                                          int64_t beta_stride, int bos, int vh, int n, int lane,
                                          float* sG, float* sB) {
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

// All threads, two per row of sQ and sK (raw, zero past n): rq = 1 / sqrt(q.q + 1e-6) and
// rk likewise (1 without the L2 norm), as sRq = rq * scale and sRk (zero past n); `rq` / `rk`
// (the key head's rows from the chunk's first) get rows < n when non-null.
__device__ inline void RowNorms(const bf16_t* sQ, const bf16_t* sK, int n, bool l2norm,
                                float scale, float* sRq, float* sRk, float* rq, float* rk) {
  const int r = threadIdx.x / 2 % BT, half = threadIdx.x % 2;
  const bool is_q = threadIdx.x < 2 * BT;
  const bf16_t* row = (is_q ? sQ : sK) + r * LDH + half * (DK / 2);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < DK / 2; c += 8) {
    const uint4 x = *reinterpret_cast<const uint4*>(row + c);
    const uint32_t p[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&p[e]));
      s += f.x * f.x + f.y * f.y;
    }
  }
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  const float inv = l2norm ? rsqrtf(s + 1e-6f) : 1.f;
  if (half != 0) return;
  if (is_q) sRq[r] = r < n ? inv * scale : 0.f;
  else sRk[r] = r < n ? inv : 0.f;
  float* dst = is_q ? rq : rk;
  if (dst != nullptr && r < n) dst[r] = inv;
}

// Kernel 1: blockIdx.x = the chunk over all documents, blockIdx.y = key head x slices of
// its value heads (kHeadsPerBlock per slice).
__global__ void __launch_bounds__(kThreads, 3)
    gdr_chunk_prepare_kernel(const bf16_t* q, int64_t q_stride, const bf16_t* k, int64_t k_stride,
                             const float* g, int64_t g_stride, const float* beta,
                             int64_t beta_stride, const int32_t* cu, int docs, int64_t tokens,
                             int hk, int hv, bool l2norm, float scale, void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem);  // q (raw); then A of head 0
  bf16_t* sK = sQ + BT * LDH;                     // k (raw); then A of head 1
  // A of value head h: [64][LDA] f32 at sA + h * BT * LDA (over q, over k, then its own)
  float* sA = reinterpret_cast<float*>(smem);
  float* sG = sA + kHeadsPerBlock * BT * LDA;  // gc [heads][64]
  float* sB = sG + kHeadsPerBlock * BT;        // beta [heads][64]
  float* sRq = sB + kHeadsPerBlock * BT;       // rq * scale [64]
  float* sRk = sRq + BT;                       // rk [64]
  __shared__ int s_bos, s_n;
  const int group = hv / hk, slices = (group + kHeadsPerBlock - 1) / kHeadsPerBlock;
  const int kh = blockIdx.y / slices, slice = blockIdx.y % slices;
  const int vh0 = kh * group + slice * kHeadsPerBlock;
  const int heads = min(kHeadsPerBlock, group - slice * kHeadsPerBlock);
  if (threadIdx.x < 32) {
    int bos = 0, n = 0;
    if (!FindChunk(cu, docs, blockIdx.x, &bos, &n)) n = 0;
    if (threadIdx.x == 0) {
      s_bos = bos;
      s_n = n;
    }
  }
  __syncthreads();
  const int bos = s_bos, n = s_n;
  if (n == 0) return;
  const Workspace W = Carve(ws, tokens, hk, hv);
  LoadRows128(sQ, q + bos * q_stride + kh * DK, q_stride, n);
  LoadRows128(sK, k + bos * k_stride + kh * DK, k_stride, n);
  CpAsyncCommit();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < heads)
    LoadGates(g, g_stride, beta, beta_stride, bos, vh0 + warp, n, lane, sG + warp * BT,
              sB + warp * BT);
  CpAsyncWait<0>();
  __syncthreads();
  const bool first = slice == 0;  // one slice writes the key head's norms
  RowNorms(sQ, sK, n, l2norm, scale, sRq, sRk,
           first ? W.rq + int64_t{kh} * tokens + bos : nullptr,
           first ? W.rk + int64_t{kh} * tokens + bos : nullptr);
  for (int h = 0; h < heads; ++h)
    if (threadIdx.x < n)
      W.gc[int64_t{vh0 + h} * tokens + bos + threadIdx.x] = sG[h * BT + threadIdx.x];
  // Warps 0-3: K K^T rows 16 w..; warps 4-7: Q K^T rows 16 (w - 4).. (raw products)
  const int mt = warp % 4;
  const bool kk_part = warp < 4;
  float acc[8][4];
  GemmRowsNt(acc, kk_part ? sK : sQ, sK, mt);
  __syncthreads();  // q and k are read, the norms are in smem: the A tiles may overwrite them
  for (int h = 0; h < heads; ++h)
    MaskProducts(acc, kk_part, mt, n, sG + h * BT, sB + h * BT, sRq, sRk, sA + h * BT * LDA,
                 W.aqk + (int64_t{vh0 + h} * tokens + bos) * BT);
  __syncthreads();
  const auto tb = [&](int h) { return W.tb + (int64_t{vh0 + h} * tokens + bos) * BT; };
  if (warp < 2 * heads) {
    const int h = warp / 2, c = threadIdx.x % BT;
    InvertDiagonalBlock(sA + h * BT * LDA, tb(h), c, sB[h * BT + c], n);
  }
  __syncthreads();
  for (int h = 0; h < heads; ++h) InvertMergeY(sA + h * BT * LDA, tb(h), n);
  __syncthreads();
  for (int h = 0; h < heads; ++h)
    InvertMergeT21(sA + h * BT * LDA, tb(h), sB[h * BT + lane], n);
}

constexpr size_t kPrepareSmem = kHeadsPerBlock * BT * LDA * 4 + (2 * kHeadsPerBlock + 2) * BT * 4;
static_assert(BT * LDA * 4 == BT * LDH * 2, "A fits over q and over k");
static_assert(kPrepareSmem * 3 + 3 * 1024 <= 228 * 1024, "three prepare blocks per SM");

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
  const int max_chunks = static_cast<int>((tokens + BT - 1) / BT) + docs;
  const int slices = (hv / hk + kHeadsPerBlock - 1) / kHeadsPerBlock;
  gdr_chunk_prepare_kernel<<<dim3(max_chunks, hk * slices), kThreads, kPrepareSmem, stream>>>(
      static_cast<const bf16_t*>(q), q_stride, static_cast<const bf16_t*>(k), k_stride, g,
      g_stride, beta, beta_stride, cu, docs, tokens, hk, hv, l2norm, scale, workspace);
  e = cudaGetLastError();
  if (e != cudaSuccess || stages < 2) return e;
  return LaunchStateKernel(out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
                           static_cast<const bf16_t*>(k), k_stride,
                           static_cast<const bf16_t*>(v), v_stride, cu, docs, tokens, hk, hv,
                           scale, workspace, stream);
}

}  // namespace tandem::kernels
