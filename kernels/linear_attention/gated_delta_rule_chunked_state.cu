// Kernel 2 of the CUDA chunked gated delta rule ("state"; gated_delta_rule_chunked.cu has the
// overview): one block per (64-wide half of dv, value head, document), 4 warps, three per SM.
// Warp i owns 16 columns of dv and the whole dk: the transposed state slice S^T [16, 128]
// lives in fp32 accumulators (64 per thread) and is never written to shared memory. Its
// accumulator layout is, once packed to bf16, both the A operand of P^T = S^T k^T and the
// B operand of R = q^ S (the m16n8k16 C and A/B fragments line up); X^T = v^T - P^T
// diag(rk exp(gc)) is likewise the A operand of v'^T = X^T Tb^T (Tb = T diag(beta) from
// kernel 1, lower triangular: its zero blocks are skipped), and v'^T the B operand of
// Aqk v' and, scaled per token, the A operand of the update
// S^T = exp(gc_last) S^T + (exp(gc_last - gc) v')^T k^. The warps share only the chunk's
// tiles in shared memory (q, k, a 64-column slice of v, Tb, the masked Q K^T) and small
// per-token factor arrays; they read q and k through ldmatrix, each the whole tile.
// Thread-safety: device code and its launcher; asynchronous on the given stream.
#include "kernels/linear_attention/gated_delta_rule_chunked_device.cuh"

namespace tandem::kernels::gdr_internal {
namespace {

constexpr int kStateWarps = 4;
constexpr int kStateThreads = kStateWarps * 32;
constexpr int BVB = kStateWarps * 16;  // dv per block
constexpr int LDU = BVB + 8;           // bf16 row pitch of the u slice [64][64]

// Async copy of rows [0, n) of a [*, kCols] bf16 matrix (row pitch `stride` elements) to
// smem rows of pitch kLd; rows [n, 64) are zero-filled. All kStateThreads threads.
template <int kCols, int kLd>
__device__ inline void LoadTile(bf16_t* dst, const bf16_t* src, int64_t stride, int n) {
  constexpr int kSeg = kCols / 8;  // 16-byte pieces per row
  constexpr int kRowsPerPass = kStateThreads / kSeg;
  const int r0 = threadIdx.x / kSeg, c = (threadIdx.x % kSeg) * 8;
  src += c;
  const bf16_t* p = src + r0 * stride;
  const int64_t step = kRowsPerPass * stride;
#pragma unroll
  for (int r = r0; r < BT; r += kRowsPerPass, p += step) {
    const bool valid = r < n;
    CpAsync16(dst + r * kLd + c, valid ? p : src, valid);
  }
}

struct StateSmem {
  bf16_t* q;    // [64][LDH] raw q
  bf16_t* k;    // [64][LDH] raw k
  bf16_t* v;    // [64][LDU] this block's 64 columns of v (raw)
  bf16_t* tb;   // [64][LDT] T diag(beta)
  bf16_t* aqk;  // [64][LDT] masked Q K^T
  float* fo;    // [2][64] exp(gc) rq scale (the output's row factor), by chunk parity
  float* fd;    // [2][64] exp(gc_last - gc) rk (the update's token factor)
  float* fw;    // [2][64] exp(gc) rk (P's token factor)
  float* decay; // [2] exp(gc_last)
  float* raw;   // [4][64] the next chunk's gc, gc_last, rq, rk, thread t's copies in column t
};

// The per-token factors of a chunk in two steps: threads < 64 copy their token's scalars
// into `raw` asynchronously (LoadRawFactors, rows >= `rows` zero), and once that group
// has landed turn them into fo / fd / fw / decay of buffer `buf` (StoreFactors; each thread
// reads only what it copied itself, so no barrier is needed between the two).
__device__ inline void LoadRawFactors(const StateSmem& s, const Workspace& W, int64_t vrow,
                                      int64_t krow, int at, int rows) {
  const int t = threadIdx.x;
  if (t >= BT) return;
  const bool valid = t < rows;
  const int64_t r = valid ? at + t : at;
  CpAsync4(s.raw + t, W.gc + vrow + r, valid);
  CpAsync4(s.raw + BT + t, W.gc + vrow + at + rows - 1, true);
  CpAsync4(s.raw + 2 * BT + t, W.rq + krow + r, valid);
  CpAsync4(s.raw + 3 * BT + t, W.rk + krow + r, valid);
}
__device__ inline void StoreFactors(const StateSmem& s, int buf, float scale) {
  const int t = threadIdx.x;
  if (t >= BT) return;
  const float gc = s.raw[t], gl = s.raw[BT + t];
  s.fo[buf * BT + t] = __expf(gc) * s.raw[2 * BT + t] * scale;
  s.fd[buf * BT + t] = __expf(gl - gc) * s.raw[3 * BT + t];
  s.fw[buf * BT + t] = __expf(gc) * s.raw[3 * BT + t];
  if (t == 0) s.decay[buf] = __expf(gl);
}

// P^T = S^T k^T (pt: 8 n8 tiles over the chunk's tokens; raw k) and R = q S (ro: 4 m-tiles
// of tokens x 2 n8 tiles of this warp's dv columns), K = dk; S^T packed per k-step.
__device__ inline void StateProducts(float (&pt)[8][4], float (&ro)[4][2][4],
                                     const float (&st)[16][4], const bf16_t* sK,
                                     const bf16_t* sQ) {
  const int lane = threadIdx.x % 32, mi = lane / 8, r8 = lane % 8;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) pt[nt][0] = pt[nt][1] = pt[nt][2] = pt[nt][3] = 0.f;
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) ro[m][h][0] = ro[m][h][1] = ro[m][h][2] = ro[m][h][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
    // A fragment of S^T (rows: dv, k: dk 16 kk..); {a0, a2} / {a1, a3} are the B fragments
    // of S (k: dk, n: dv rows 0-7 / 8-15 of this warp).
    const uint32_t a[4] = {Pack(st[2 * kk][0], st[2 * kk][1]), Pack(st[2 * kk][2], st[2 * kk][3]),
                           Pack(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                           Pack(st[2 * kk + 1][2], st[2 * kk + 1][3])};
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      Ldsm4(b, sK + (np * 16 + (mi >> 1) * 8 + r8) * LDH + kk * 16 + (mi & 1) * 8);
      Mma(pt[2 * np], a, b[0], b[1]);
      Mma(pt[2 * np + 1], a, b[2], b[3]);
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      uint32_t x[4];
      Ldsm4(x, sQ + (m * 16 + (lane & 15)) * LDH + kk * 16 + (lane >> 4) * 8);
      Mma(ro[m][0], x, a[0], a[2]);
      Mma(ro[m][1], x, a[1], a[3]);
    }
  }
}

// pt = X^T = v^T - P^T diag(fw), v^T read from the v slice by transposing ldmatrix.
__device__ inline void FormX(float (&pt)[8][4], const bf16_t* sV, const float* fw, int warp) {
  const int lane = threadIdx.x % 32, mi = lane / 8, r8 = lane % 8, tig = lane % 4;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    uint32_t r[4];  // (token tile 2p, dv 0-7), (2p, 8-15), (2p + 1, 0-7), (2p + 1, 8-15)
    Ldsm4T(r, sV + (p * 16 + (mi >> 1) * 8 + r8) * LDU + warp * 16 + (mi & 1) * 8);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 vv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r[e]));
      const float2 f = *reinterpret_cast<const float2*>(fw + (2 * p + (e >> 1)) * 8 + 2 * tig);
      float* c = pt[2 * p + (e >> 1)] + 2 * (e & 1);
      c[0] = vv.x - f.x * c[0];
      c[1] = vv.y - f.y * c[1];
    }
  }
}

// x = v'^T = X^T Tb^T in place (K = the chunk's tokens j, N = tokens i; Tb[i][j] = 0 for
// j > i, so the k-steps past the n-tile pair's diagonal are skipped).
__device__ inline void ApplyT(float (&x)[8][4], const bf16_t* sTb) {
  const int lane = threadIdx.x % 32, mi = lane / 8, r8 = lane % 8;
  uint32_t a[4][4];  // A fragments of X^T per k-step
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = Pack(x[2 * kk][0], x[2 * kk][1]);
    a[kk][1] = Pack(x[2 * kk][2], x[2 * kk][3]);
    a[kk][2] = Pack(x[2 * kk + 1][0], x[2 * kk + 1][1]);
    a[kk][3] = Pack(x[2 * kk + 1][2], x[2 * kk + 1][3]);
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) x[nt][0] = x[nt][1] = x[nt][2] = x[nt][3] = 0.f;
#pragma unroll
  for (int np = 0; np < 4; ++np)
#pragma unroll
    for (int kk = 0; kk <= np; ++kk) {
      uint32_t b[4];
      Ldsm4(b, sTb + (np * 16 + (mi >> 1) * 8 + r8) * LDT + kk * 16 + (mi & 1) * 8);
      Mma(x[2 * np], a[kk], b[0], b[1]);
      Mma(x[2 * np + 1], a[kk], b[2], b[3]);
    }
}

// ro = fo R + Aqk v' (v'^T in vt), then stored to rows [0, n) of out.
__device__ inline void OutputRows(float (&ro)[4][2][4], const float (&vt)[8][4],
                                  const bf16_t* sAqk, const float* fo, void* out,
                                  int64_t out_stride, bool out_f32, int64_t row0, int col0,
                                  int n) {
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  uint32_t vb[8][2];  // B fragments of v' (k: tokens of tile nt, n: dv 0-7 / 8-15)
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    vb[nt][0] = Pack(vt[nt][0], vt[nt][1]);
    vb[nt][1] = Pack(vt[nt][2], vt[nt][3]);
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const float f0 = fo[m * 16 + gid], f1 = fo[m * 16 + gid + 8];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ro[m][h][0] *= f0;
      ro[m][h][1] *= f0;
      ro[m][h][2] *= f1;
      ro[m][h][3] *= f1;
    }
#pragma unroll
    for (int kk = 0; kk < BT / 16; ++kk) {
      uint32_t x[4];
      Ldsm4(x, sAqk + (m * 16 + (lane & 15)) * LDT + kk * 16 + (lane >> 4) * 8);
      Mma(ro[m][0], x, vb[2 * kk][0], vb[2 * kk + 1][0]);
      Mma(ro[m][1], x, vb[2 * kk][1], vb[2 * kk + 1][1]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = m * 16 + gid + 8 * hh;
        if (i >= n) continue;
        const int64_t o = (row0 + i) * out_stride + col0 + h * 8 + 2 * tig;
        if (out_f32)
          *reinterpret_cast<float2*>(static_cast<float*>(out) + o) =
              make_float2(ro[m][h][2 * hh], ro[m][h][2 * hh + 1]);
        else
          *reinterpret_cast<uint32_t*>(static_cast<bf16_t*>(out) + o) =
              Pack(ro[m][h][2 * hh], ro[m][h][2 * hh + 1]);
      }
  }
}

// st = decay st + (fd v')^T k, K = the chunk's tokens (rows of sK, raw k).
__device__ inline void UpdateState(float (&st)[16][4], const float (&vt)[8][4], const bf16_t* sK,
                                   const float* fd, float decay) {
  const int lane = threadIdx.x % 32, tig = lane % 4, mi = lane / 8, r8 = lane % 8;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) st[nt][e] *= decay;
#pragma unroll
  for (int kk = 0; kk < BT / 16; ++kk) {
    const float2 d0 = *reinterpret_cast<const float2*>(fd + kk * 16 + 2 * tig);
    const float2 d1 = *reinterpret_cast<const float2*>(fd + kk * 16 + 8 + 2 * tig);
    const uint32_t a[4] = {Pack(vt[2 * kk][0] * d0.x, vt[2 * kk][1] * d0.y),
                           Pack(vt[2 * kk][2] * d0.x, vt[2 * kk][3] * d0.y),
                           Pack(vt[2 * kk + 1][0] * d1.x, vt[2 * kk + 1][1] * d1.y),
                           Pack(vt[2 * kk + 1][2] * d1.x, vt[2 * kk + 1][3] * d1.y)};
#pragma unroll
    for (int np = 0; np < 8; ++np) {
      uint32_t b[4];
      Ldsm4T(b, sK + (kk * 16 + (mi & 1) * 8 + r8) * LDH + np * 16 + (mi >> 1) * 8);
      Mma(st[2 * np], a, b[0], b[1]);
      Mma(st[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Chunk pipeline (cp.async groups, in commit order per chunk c):
//   Ga(c)       the masked Q K^T, issued at the top of chunk c (every warp is past the
//               output of chunk c - 1, B0); waited for before B1;
//   Gq(c + 1)   q and the raw factors, issued once every warp has done P and R of chunk c
//               (B0.5); after the output every thread waits for it and threads < 64 store
//               the next factors (each from the raw values it copied itself);
//   Gk(c + 1)   k, the v slice and Tb, issued once every warp is past the update (B1).
// The top of a chunk waits for everything.
__global__ void __launch_bounds__(kStateThreads, 3)
    gdr_chunk_state_kernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                           int64_t q_stride, const bf16_t* k, int64_t k_stride, const bf16_t* v,
                           int64_t v_stride, const int32_t* cu, int64_t tokens, int hk, int hv,
                           float scale, const void* ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  StateSmem s;
  s.q = reinterpret_cast<bf16_t*>(smem);
  s.k = s.q + BT * LDH;
  s.v = s.k + BT * LDH;
  s.tb = s.v + BT * LDU;
  s.aqk = s.tb + BT * LDT;
  s.fo = reinterpret_cast<float*>(s.aqk + BT * LDT);
  s.fd = s.fo + 2 * BT;
  s.fw = s.fd + 2 * BT;
  s.raw = s.fw + 2 * BT;
  s.decay = s.raw + 4 * BT;
  // One flat grid dimension (x has no 65535 limit, so any number of documents): the two
  // halves of one (document, head) are neighbours, and share q, k and Tb in L2.
  constexpr int kHalves = DV / BVB;
  const int v0 = static_cast<int>(blockIdx.x % kHalves) * BVB;
  const int vh = static_cast<int>(blockIdx.x / kHalves % hv);
  const int doc = static_cast<int>(blockIdx.x / kHalves / hv), kh = vh / (hv / hk);
  const int warp = threadIdx.x / 32;
  const Workspace W = Carve(const_cast<void*>(ws), tokens, hk, hv);
  const int begin = cu[doc], end = cu[doc + 1];
  if (begin >= end) return;
  const int64_t vrow = int64_t{vh} * tokens, krow = int64_t{kh} * tokens;
  const bf16_t* th = W.tb + vrow * BT;
  const bf16_t* ah = W.aqk + vrow * BT;
  const bf16_t* qh = q + kh * DK;
  const bf16_t* kh_rows = k + kh * DK;
  const bf16_t* vh_cols = v + vh * DV + v0;
  {
    const int n0 = min(BT, end - begin);
    LoadTile<DK, LDH>(s.q, qh + begin * q_stride, q_stride, n0);
    LoadTile<DK, LDH>(s.k, kh_rows + begin * k_stride, k_stride, n0);
    LoadTile<BVB, LDU>(s.v, vh_cols + begin * v_stride, v_stride, n0);
    LoadTile<BT, LDT>(s.tb, th + int64_t{begin} * BT, BT, n0);
    LoadRawFactors(s, W, vrow, krow, begin, n0);
    CpAsyncCommit();
    CpAsyncWait<0>();
    StoreFactors(s, 0, scale);
  }
  float st[16][4];  // S^T: this warp's 16 dv rows x dk (16 n8 tiles)
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) st[nt][0] = st[nt][1] = st[nt][2] = st[nt][3] = 0.f;
  int buf = 0;
  for (int bos = begin; bos < end; bos += BT, buf ^= 1) {
    const int n = min(BT, end - bos), next = bos + BT;
    const int nn = min(BT, end - next);  // rows of the next chunk (<= 0: none)
    CpAsyncWait<0>();
    __syncthreads();  // B0: q, k, v, Tb and the factors of this chunk are in smem
    LoadTile<BT, LDT>(s.aqk, ah + int64_t{bos} * BT, BT, n);
    CpAsyncCommit();
    float pt[8][4], ro[4][2][4];
    StateProducts(pt, ro, st, s.k, s.q);
    __syncthreads();  // B0.5: q is read
    if (nn > 0) {
      LoadTile<DK, LDH>(s.q, qh + next * q_stride, q_stride, nn);
      LoadRawFactors(s, W, vrow, krow, next, nn);
    }
    CpAsyncCommit();
    FormX(pt, s.v, s.fw + buf * BT, warp);
    ApplyT(pt, s.tb);
    UpdateState(st, pt, s.k, s.fd + buf * BT, s.decay[buf]);
    CpAsyncWait<1>();
    __syncthreads();  // B1: the masked Q K^T is in smem; k, v and Tb are read
    if (nn > 0) {
      LoadTile<DK, LDH>(s.k, kh_rows + next * k_stride, k_stride, nn);
      LoadTile<BVB, LDU>(s.v, vh_cols + next * v_stride, v_stride, nn);
      LoadTile<BT, LDT>(s.tb, th + int64_t{next} * BT, BT, nn);
    }
    CpAsyncCommit();  // (empty groups on the last chunk keep the wait counts in step)
    OutputRows(ro, pt, s.aqk, s.fo + buf * BT, out, out_stride, out_f32, bos,
               vh * DV + v0 + warp * 16, n);
    if (nn > 0) {
      CpAsyncWait<1>();
      StoreFactors(s, buf ^ 1, scale);
    }
  }
}

constexpr size_t kStateSmem =
    2 * BT * LDH * 2 + BT * LDU * 2 + 2 * BT * LDT * 2 + (10 * BT + 2) * sizeof(float);
static_assert(kStateSmem * 3 + 3 * 1024 <= 228 * 1024, "three state blocks per SM");

}  // namespace

cudaError_t LaunchStateKernel(void* out, int64_t out_stride, bool out_f32, const bf16_t* q,
                              int64_t q_stride, const bf16_t* k, int64_t k_stride,
                              const bf16_t* v, int64_t v_stride, const int32_t* cu, int docs,
                              int64_t tokens, int hk, int hv,
                              float scale, void* workspace, cudaStream_t stream) {
  const auto kernel = gdr_chunk_state_kernel;
  // The opt-in to > 48 KiB of shared memory (per device, so at every launch).
  const cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kStateSmem));
  if (e != cudaSuccess) return e;
  kernel<<<static_cast<unsigned>(docs) * hv * (DV / BVB), kStateThreads, kStateSmem, stream>>>(
      out, out_stride, out_f32, q, q_stride, k, k_stride, v, v_stride, cu, tokens, hk, hv, scale,
      workspace);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::gdr_internal
