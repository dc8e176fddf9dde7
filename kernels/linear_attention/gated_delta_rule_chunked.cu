// CUDA chunked gated delta rule (gated_delta_rule_chunked.h): chunk 64, dk = dv = 128,
// bf16 tensor-core products (WMMA m16n16k16, fp32 accumulation).
//
// Kernel 1, one block per (chunk, value head), 8 warps: loads the chunk's q, k, v, g, beta;
// L2-normalises q and k (rounded to bf16, as fla does); gc = cumsum(g); K K^T and Q K^T on
// tensor cores; A = strictly-lower beta_i (k_i.k_j) exp(gc_i - gc_j); T = (I + A)^-1 by
// forward substitution in shared memory (4 threads per column, one barrier per row); w = T (beta exp(gc) k) and
// u = T (beta v) on tensor cores; writes w, u, the masked decayed Q K^T and gc to the
// workspace.
// Kernel 2, one block per (document, value head, 64-wide slice of dv), 8 warps: the state
// slice S [128, 64] in fp32 shared memory (a bf16 copy feeds the tensor cores); per chunk in
// order: P = w S and R = q S; v' = u - P; o = exp(gc) R + Aqk v'; S = exp(gc_last) S +
// (k exp(gc_last - gc))^T v'.
#include <cuda_bf16.h>
#include <mma.h>

#include "kernels/linear_attention/gated_delta_rule_chunked_kernels.h"

namespace tandem::kernels {
namespace {

using bf16_t = __nv_bfloat16;
using namespace nvcuda;

constexpr int BT = 64;    // chunk
constexpr int DK = 128;   // key head dim
constexpr int DV = 128;   // value head dim
constexpr int BV = 64;    // dv slice per kernel-2 block
constexpr int LDH = DK + 8;  // bf16 row pitch of [64, 128] tiles
constexpr int LDC = BT + 8;  // bf16 row pitch of [*, 64] tiles
constexpr int LDF = BT + 4;  // f32 row pitch of [*, 64] tiles
constexpr int LDO = DK + 4;  // f32 row pitch of [64, 128] staging
constexpr int kThreads = 256;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16_t, wmma::row_major>;
using FragAc = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16_t, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16_t, wmma::row_major>;
using FragBc = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16_t, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

struct Workspace {
  bf16_t* w;    // [hv][T][DK]
  bf16_t* u;    // [hv][T][DV]
  bf16_t* aqk;  // [hv][T][BT]
  float* gc;    // [hv][T]
};

__device__ Workspace Carve(void* ws, int64_t t, int hv) {
  Workspace p;
  char* b = static_cast<char*>(ws);
  p.w = reinterpret_cast<bf16_t*>(b);
  b += static_cast<int64_t>(hv) * t * DK * 2;
  p.u = reinterpret_cast<bf16_t*>(b);
  b += static_cast<int64_t>(hv) * t * DV * 2;
  p.aqk = reinterpret_cast<bf16_t*>(b);
  b += static_cast<int64_t>(hv) * t * BT * 2;
  p.gc = reinterpret_cast<float*>(b);
  return p;
}

// Copies rows [0, n) of a [*, 128] bf16 matrix (row pitch `stride` elements) to smem rows of
// pitch LDH; rows [n, 64) become zero. 16-byte vectors.
__device__ void LoadRows128(bf16_t* dst, const bf16_t* src, int64_t stride, int n) {
  for (int idx = threadIdx.x; idx < BT * (DK / 8); idx += blockDim.x) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < n) val = *reinterpret_cast<const uint4*>(src + r * stride + c);
    *reinterpret_cast<uint4*>(dst + r * LDH + c) = val;
  }
}

// In place: each row x (of 128, pitch LDH) becomes x * rsqrt(sum x^2 + 1e-6) * scale (when
// l2), else x * scale. One warp per row.
__device__ void NormalizeRows(bf16_t* x, bool l2, float scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < BT; r += kThreads / 32) {
    bf16_t* row = x + r * LDH + lane * 4;
    float v[4], ss = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[i] = __bfloat162float(row[i]);
      ss += v[i] * v[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float f = (l2 ? rsqrtf(ss + 1e-6f) : 1.f) * scale;
#pragma unroll
    for (int i = 0; i < 4; ++i) row[i] = __float2bfloat16(v[i] * f);
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

__global__ void __launch_bounds__(kThreads)
    gdr_chunk_prepare_kernel(const bf16_t* q, int64_t q_stride, const bf16_t* k, int64_t k_stride,
                             const bf16_t* v, int64_t v_stride, const float* g, int64_t g_stride,
                             const float* beta, int64_t beta_stride, const int32_t* cu, int docs,
                             int64_t tokens, int hk, int hv, bool l2norm, float scale, void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem);  // later k * beta exp(gc)
  bf16_t* sK = sQ + BT * LDH;
  bf16_t* sV = sK + BT * LDH;                     // later v * beta
  float* sF = reinterpret_cast<float*>(sV + BT * LDH);  // [2][64][LDF]: KK->A->T, QK; staging
  bf16_t* sT = reinterpret_cast<bf16_t*>(sF + 2 * BT * LDF);  // [64][LDC]
  float* sG = reinterpret_cast<float*>(sT + BT * LDC);       // gc [64]
  float* sB = sG + BT;                                        // beta [64]
  __shared__ int s_bos, s_n;
  const int vh = blockIdx.y, kh = vh / (hv / hk);
  if (threadIdx.x == 0) {
    int bos = 0, n = 0;
    if (!FindChunk(cu, docs, blockIdx.x, &bos, &n)) n = 0;
    s_bos = bos;
    s_n = n;
  }
  __syncthreads();
  const int bos = s_bos, n = s_n;
  if (n == 0) return;
  const Workspace W = Carve(ws, tokens, hv);
  LoadRows128(sQ, q + bos * q_stride + kh * DK, q_stride, n);
  LoadRows128(sK, k + bos * k_stride + kh * DK, k_stride, n);
  LoadRows128(sV, v + bos * v_stride + vh * DV, v_stride, n);
  if (threadIdx.x < BT) {
    const int r = threadIdx.x;
    sG[r] = r < n ? g[(bos + r) * g_stride + vh] : 0.f;
    sB[r] = r < n ? beta[(bos + r) * beta_stride + vh] : 0.f;
  }
  __syncthreads();
  NormalizeRows(sQ, l2norm, scale);
  NormalizeRows(sK, l2norm, 1.f);
  if (threadIdx.x == 0) {
    float acc = 0.f;
    for (int r = 0; r < BT; ++r) sG[r] = (acc += sG[r]);
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  // KK = K K^T into sF[0], QK = Q K^T into sF[1]: 32 tiles, 4 per warp.
  for (int tile = warp; tile < 32; tile += kThreads / 32) {
    const int which = tile / 16, ti = (tile % 16) / 4, tj = tile % 4;
    const bf16_t* a = (which == 0 ? sK : sQ) + ti * 16 * LDH;
    FragC acc;
    wmma::fill_fragment(acc, 0.f);
    for (int kk = 0; kk < DK; kk += 16) {
      FragA fa;
      FragBc fb;
      wmma::load_matrix_sync(fa, a + kk, LDH);
      wmma::load_matrix_sync(fb, sK + tj * 16 * LDH + kk, LDH);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(sF + which * BT * LDF + ti * 16 * LDF + tj * 16, acc, LDF,
                            wmma::mem_row_major);
  }
  __syncthreads();
  // A (in place) and the masked decayed Q K^T (to the workspace); gc to the workspace.
  for (int idx = threadIdx.x; idx < BT * BT; idx += kThreads) {
    const int i = idx / BT, j = idx % BT;
    float* a = sF + i * LDF + j;
    *a = (j < i && i < n) ? sB[i] * *a * __expf(sG[i] - sG[j]) : 0.f;
    if (i < n) {
      const float qk = sF[BT * LDF + i * LDF + j];
      W.aqk[(static_cast<int64_t>(vh) * tokens + bos + i) * BT + j] =
          __float2bfloat16(j <= i ? qk * __expf(sG[i] - sG[j]) : 0.f);
    }
  }
  if (threadIdx.x < n) W.gc[static_cast<int64_t>(vh) * tokens + bos + threadIdx.x] = sG[threadIdx.x];
  __syncthreads();
  // T = (I + A)^-1 into sF[1] (the Q K^T area, consumed above), row by row:
  // T[i,c] = -sum_{j=c}^{i-1} A[i,j] T[j,c] (c < i). Step i reads A row i and T rows < i and
  // writes T row i only, so one barrier per step suffices.
  float* sTf = sF + BT * LDF;
  {
    const int c = threadIdx.x / 4, part = threadIdx.x % 4;
    for (int idx = threadIdx.x; idx < BT * BT; idx += kThreads)
      sTf[(idx / BT) * LDF + idx % BT] = (idx / BT == idx % BT) ? 1.f : 0.f;
    __syncthreads();
    for (int i = 1; i < n; ++i) {
      float s = 0.f;
      if (c < i)
        for (int j = c + part; j < i; j += 4) s += sF[i * LDF + j] * sTf[j * LDF + c];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (part == 0 && c < i) sTf[i * LDF + c] = -s;
      __syncthreads();
    }
  }
  // T to bf16; K * beta exp(gc) over Q; V * beta in place.
  for (int idx = threadIdx.x; idx < BT * BT; idx += kThreads) {
    const int i = idx / BT, j = idx % BT;
    sT[i * LDC + j] = __float2bfloat16(sTf[i * LDF + j]);
  }
  for (int idx = threadIdx.x; idx < BT * DK; idx += kThreads) {
    const int i = idx / DK, j = idx % DK;
    sQ[i * LDH + j] = __float2bfloat16(__bfloat162float(sK[i * LDH + j]) * sB[i] * __expf(sG[i]));
    sV[i * LDH + j] = __float2bfloat16(__bfloat162float(sV[i * LDH + j]) * sB[i]);
  }
  __syncthreads();
  // w = T (K beta exp(gc)), then u = T (V beta): [64, 128] each, 4 tiles per warp.
  for (int pass = 0; pass < 2; ++pass) {
    const bf16_t* rhs = pass == 0 ? sQ : sV;
    for (int tile = warp; tile < 32; tile += kThreads / 32) {
      const int ti = tile / 8, tj = tile % 8;
      FragC acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < BT; kk += 16) {
        FragA fa;
        FragB fb;
        wmma::load_matrix_sync(fa, sT + ti * 16 * LDC + kk, LDC);
        wmma::load_matrix_sync(fb, rhs + kk * LDH + tj * 16, LDH);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(sF + ti * 16 * LDO + tj * 16, acc, LDO, wmma::mem_row_major);
    }
    __syncthreads();
    bf16_t* dst = (pass == 0 ? W.w : W.u) + (static_cast<int64_t>(vh) * tokens + bos) * DK;
    for (int idx = threadIdx.x; idx < n * DK; idx += kThreads)
      dst[idx] = __float2bfloat16(sF[(idx / DK) * LDO + idx % DK]);
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads)
    gdr_chunk_state_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                           int64_t q_stride, const bf16_t* k, int64_t k_stride,
                           const int32_t* cu, int64_t tokens, int hk, int hv, bool l2norm,
                           float scale, const void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  float* sS = reinterpret_cast<float*>(smem);     // [128][LDF] state slice
  float* sU = sS + DK * LDF;                      // [64][LDF] u, then v'
  float* sP = sU + BT * LDF;                      // [64][LDF] w S
  float* sO = sP + BT * LDF;                      // [64][LDF] o
  float* sG = sO + BT * LDF;                      // [64] gc
  bf16_t* sSb = reinterpret_cast<bf16_t*>(sG + BT);  // [128][LDC]
  bf16_t* sW = sSb + DK * LDC;                    // [64][LDH]
  bf16_t* sQ = sW + BT * LDH;                     // [64][LDH]
  bf16_t* sK = sQ + BT * LDH;                     // [64][LDH], later k exp(gc_last - gc)
  bf16_t* sA = sK + BT * LDH;                     // [64][LDC] masked Q K^T
  bf16_t* sVb = sA + BT * LDC;                    // [64][LDC] v' in bf16
  const int doc = blockIdx.x, vh = blockIdx.y, v0 = blockIdx.z * BV, kh = vh / (hv / hk);
  const int warp = threadIdx.x / 32;
  Workspace W = Carve(const_cast<void*>(ws), tokens, hv);
  for (int idx = threadIdx.x; idx < DK * LDF; idx += kThreads) sS[idx] = 0.f;
  for (int idx = threadIdx.x; idx < DK * LDC; idx += kThreads) sSb[idx] = __float2bfloat16(0.f);
  const int begin = cu[doc], end = cu[doc + 1];
  for (int bos = begin; bos < end; bos += BT) {
    const int n = min(BT, end - bos);
    const int64_t row0 = static_cast<int64_t>(vh) * tokens + bos;
    LoadRows128(sW, W.w + row0 * DK, DK, n);
    LoadRows128(sQ, q + bos * q_stride + kh * DK, q_stride, n);
    LoadRows128(sK, k + bos * k_stride + kh * DK, k_stride, n);
    for (int idx = threadIdx.x; idx < BT * BT; idx += kThreads) {
      const int i = idx / BT, j = idx % BT;
      sA[i * LDC + j] = i < n ? W.aqk[(row0 + i) * BT + j] : __float2bfloat16(0.f);
      sU[i * LDF + j] = i < n ? __bfloat162float(W.u[(row0 + i) * DV + v0 + j]) : 0.f;
    }
    if (threadIdx.x < BT) sG[threadIdx.x] = threadIdx.x < n ? W.gc[row0 + threadIdx.x] : 0.f;
    __syncthreads();
    NormalizeRows(sQ, l2norm, scale);
    NormalizeRows(sK, l2norm, 1.f);
    __syncthreads();
    // P = w S (warps 0-3), R = q S (warps 4-7): 16 tiles each.
    for (int tile = warp; tile < 32; tile += kThreads / 32) {
      const int which = tile / 16, ti = (tile % 16) / 4, tj = tile % 4;
      const bf16_t* a = (which == 0 ? sW : sQ) + ti * 16 * LDH;
      FragC acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < DK; kk += 16) {
        FragA fa;
        FragB fb;
        wmma::load_matrix_sync(fa, a + kk, LDH);
        wmma::load_matrix_sync(fb, sSb + kk * LDC + tj * 16, LDC);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync((which == 0 ? sP : sO) + ti * 16 * LDF + tj * 16, acc, LDF,
                              wmma::mem_row_major);
    }
    __syncthreads();
    const float g_last = sG[n - 1];
    for (int idx = threadIdx.x; idx < BT * BT; idx += kThreads) {
      const int i = idx / BT, j = idx % BT;
      const float vn = i < n ? sU[i * LDF + j] - sP[i * LDF + j] : 0.f;
      sVb[i * LDC + j] = __float2bfloat16(vn);
      sO[i * LDF + j] *= __expf(sG[i]);
    }
    for (int idx = threadIdx.x; idx < BT * DK; idx += kThreads) {
      const int i = idx / DK, j = idx % DK;
      const float f = i < n ? __expf(g_last - sG[i]) : 0.f;
      sK[i * LDH + j] = __float2bfloat16(__bfloat162float(sK[i * LDH + j]) * f);
    }
    __syncthreads();
    // o += Aqk v' (16 tiles); S = exp(g_last) S + kd^T v' (32 tiles).
    const float decay = __expf(g_last);
    for (int tile = warp; tile < 48; tile += kThreads / 32) {
      FragC acc;
      if (tile < 16) {
        const int ti = tile / 4, tj = tile % 4;
        float* c = sO + ti * 16 * LDF + tj * 16;
        wmma::load_matrix_sync(acc, c, LDF, wmma::mem_row_major);
        for (int kk = 0; kk < BT; kk += 16) {
          FragA fa;
          FragB fb;
          wmma::load_matrix_sync(fa, sA + ti * 16 * LDC + kk, LDC);
          wmma::load_matrix_sync(fb, sVb + kk * LDC + tj * 16, LDC);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(c, acc, LDF, wmma::mem_row_major);
      } else {
        const int ti = (tile - 16) / 4, tj = (tile - 16) % 4;  // ti over dk (8), tj over BV (4)
        float* c = sS + ti * 16 * LDF + tj * 16;
        wmma::load_matrix_sync(acc, c, LDF, wmma::mem_row_major);
        for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= decay;
        for (int kk = 0; kk < BT; kk += 16) {
          FragAc fa;  // kd^T: element (m, kk) = kd[kk][m]
          FragB fb;
          wmma::load_matrix_sync(fa, sK + kk * LDH + ti * 16, LDH);
          wmma::load_matrix_sync(fb, sVb + kk * LDC + tj * 16, LDC);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(c, acc, LDF, wmma::mem_row_major);
      }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < n * BV; idx += kThreads) {
      const int i = idx / BV, j = idx % BV;
      const int64_t o = (bos + i) * out_stride + vh * DV + v0 + j;
      if (out_f32)
        static_cast<float*>(out)[o] = sO[i * LDF + j];
      else
        static_cast<bf16_t*>(out)[o] = __float2bfloat16(sO[i * LDF + j]);
    }
    for (int idx = threadIdx.x; idx < DK * BV; idx += kThreads) {
      const int i = idx / BV, j = idx % BV;
      sSb[i * LDC + j] = __float2bfloat16(sS[i * LDF + j]);
    }
    __syncthreads();
  }
}

constexpr size_t kPrepareSmem =
    3 * BT * LDH * 2 + 2 * BT * LDF * 4 + BT * LDC * 2 + 2 * BT * 4;
constexpr size_t kStateSmem = (DK * LDF + 3 * BT * LDF + BT) * 4 + DK * LDC * 2 +
                              3 * BT * LDH * 2 + 2 * BT * LDC * 2;
static_assert(2 * BT * LDF >= BT * LDO, "the w/u staging must fit in the A/QK area");

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
  gdr_chunk_state_kernel<<<dim3(docs, hv, DV / BV), kThreads, kStateSmem, stream>>>(
      out, out_stride, out_f32, static_cast<const bf16_t*>(q), q_stride,
      static_cast<const bf16_t*>(k), k_stride, cu, tokens, hk, hv, l2norm, scale, workspace);
  return cudaGetLastError();
}

}  // namespace tandem::kernels
