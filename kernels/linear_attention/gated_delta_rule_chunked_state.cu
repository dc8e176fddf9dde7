// Kernel 2 of the CUDA chunked gated delta rule ("state"; gated_delta_rule_chunked.cu has the
// overview): one block per (32-wide slice of dv, value head, document), 8 warps, three per SM;
// the state slice S [128, 32] in fp32 accumulators, a bf16 copy in shared memory feeding the
// products, the chunks of a document in order.
#include "kernels/linear_attention/gated_delta_rule_chunked_device.cuh"

namespace tandem::kernels::gdr_internal {
namespace {

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

// acc[4][4] (16 rows x 32 columns) += a (16 x 16) * B, B the 16 rows at `b` of a [k][32]
// bf16 tile with row pitch LDS.
__device__ inline void MmaTimesK32(float (&acc)[4][4], const uint32_t (&a)[4], const bf16_t* b) {
  const int lane = threadIdx.x % 32, mi = lane / 8, r8 = lane % 8;
#pragma unroll
  for (int np = 0; np < 2; ++np) {
    uint32_t r[4];
    Ldsm4T(r, b + ((mi & 1) * 8 + r8) * LDS + np * 16 + (mi >> 1) * 8);
    Mma(acc[2 * np], a, r[0], r[1]);
    Mma(acc[2 * np + 1], a, r[2], r[3]);
  }
}

// [P; R] = [w; q^] S for this warp's m-tile: pr[4][4] over 32 columns, K = dk.
__device__ inline void GemmStateRows(float (&pr)[4][4], const bf16_t* x, const bf16_t* sS,
                                     int mt) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) pr[nt][0] = pr[nt][1] = pr[nt][2] = pr[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
    uint32_t a[4];
    Ldsm4(a, x + (mt * 16 + (lane & 15)) * LDH + kk * 16 + (lane >> 4) * 8);
    MmaTimesK32(pr, a, sS + kk * 16 * LDS);
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
      for (int kk = 0; kk < 4; ++kk) MmaTimesK32(pr, reg[kk], sVn + kk * 16 * LDS);
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
      MmaTimesK32(S, a, sVd + kk * 16 * LDS);
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

constexpr size_t kStateSmem = DK * LDS * 2 + 3 * BT * LDH * 2 + 2 * BT * LDS * 2;
static_assert(kStateSmem * 3 + 3 * 1024 <= 228 * 1024, "three state blocks per SM");

}  // namespace

cudaError_t LaunchStateKernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                              int64_t q_stride, const bf16_t* k, int64_t k_stride,
                              const int32_t* cu, int docs, int64_t tokens, int hk, int hv,
                              float scale, void* workspace, cudaStream_t stream) {
  // The opt-in to > 48 KiB of shared memory (per device, so at every launch).
  const cudaError_t e = cudaFuncSetAttribute(
      gdr_chunk_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(kStateSmem));
  if (e != cudaSuccess) return e;
  gdr_chunk_state_kernel<<<static_cast<unsigned>(docs) * hv * (DV / BV), kThreads, kStateSmem,
                           stream>>>(out, out_stride, out_f32, q, q_stride, k, k_stride, cu,
                                     tokens, hk, hv, scale, workspace);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::gdr_internal
