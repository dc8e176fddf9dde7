// DFlash block attention backward on tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate); same contract as the SIMT kernel in dflash_attention.cu.
//
// One CTA per (block b, KV head g) with G = hq / hk warps; warp w owns the 16 query slots of
// query head g * G + w. Per key tile (as in the forward) each warp recomputes S,
// P = exp(S - lse), dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ += dS K (registers), and
// stores P, dS (bf16) in shared memory; after a barrier the next tile's load is issued and
// the warps share dV = P^T dO and dK = scale dS^T Q in 16-key x 64-dim units, written
// directly for block keys and with float4 atomics for context keys.
#include "kernels/attention/dflash_mma_device.cuh"
#include "kernels/attention/dflash_wgmma_internal.h"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers

// kSplit: context tiles only feed dQ (their dK/dV come from dflash_mma_bwd_ctx), and the
// rows' delta = rowsum(dO O) is stored for that kernel.
template <int D, bool kSplit>
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

  LoadRows<D>(static_cast<const bf16_t*>(p.q), b, g, group, p.hq, qs);
  LoadRows<D>(dout, b, g, group, p.hq, dos);
  Tile t0 = TileOf(0, ctx_tiles, lo, hi, b);
  LoadKv<D>(t0.blk ? kb : kc, t0.blk ? vb : vc, t0, g, p.hk, ks, vs);
  CpAsyncCommit();

  // Per row (gid, gid + 8 of this warp's head): lse in log2 units and rowsum(dO * O).
  const int head = g * group + warp;
  float lse2[2], delta[2];
  RowStats<D>(p, b, head, kSplit, lse2, delta);
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
    const int nk16 = (t.n + 15) / 16, floor = SlotFloor(t, hi, p.window);

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
        const float pr = Visible(t, p.causal, floor, key, gid + 8 * half)
                             ? exp2f(s[n][e] * qk_scale - lse2[half])
                             : 0.0f;
        s[n][e] = pr;
        dp[n][e] = pr * (dp[n][e] - delta[half]);  // dS (before the softmax scale)
      }
    // P and dS to shared memory for phase 2; rows warp * 16 + gid (+ 8).
    const bool phase2 = !kSplit || t.blk;
#pragma unroll
    for (int n = 0; n < kTk / 8; ++n) {
      if (!phase2) break;
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
    const int units = phase2 ? 2 * nk16 * (D / 64) : 0;
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

  StoreQueryRows<D>(p.dq, p, b, head, dq, p.scale);
}

// Context dK/dV, key-major (used with kSplit). CTA (key tile kt, KV head g), 4 warps; warp
// w owns context keys k0 + 16 w .. + 15 of the tile (the M dimension). The CTA lists, in
// block order, the blocks whose range [lo, anchor) meets the tile, then walks (block, chunk
// of up to 4 query heads of g) items with a cp.async double buffer of Q, dO (64 rows each),
// lse and delta. Per item each warp forms S^T = K Q^T and dP^T = V dO^T (16 keys x 64 rows),
// P^T = exp(S^T - lse) on the keys each row sees (the block's range, cut per slot by the
// window), dS^T = P^T (dP^T - delta), and adds
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
      // Row r (slot r % 16) sees key key_lo (+ 8) iff the key is in the block's range and
      // slot <= key - WindowFloor(hi, W) (the window); lim = that bound, -1 out of range.
      // Two ints per lane, not the range test plus a floor: the d = 128 kernel is at 255
      // registers and spills with more.
      const int floor = WindowFloor(hi, p.window);
      auto lim_of = [&](int key) {
        if (key < lo || key >= hi) return -1;
        return floor == INT_MIN ? kBlock : min(kBlock, key - floor);
      };
      const int lim0 = lim_of(key_lo), lim1 = lim_of(key_lo + 8);
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
          const bool see = row % kBlock <= ((e >> 1) ? lim1 : lim0);
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

cudaError_t LaunchDFlashMmaBackward(const DFlashKernelParams& p, const DFlashPlan& plan,
                                    cudaStream_t stream) {
  const int group = p.hq / p.hk;
  if (!DFlashMmaSupported(group, p.d) || group * p.hk != p.hq) return cudaErrorInvalidValue;
  auto launch = [&](auto kernel, dim3 grid, int threads, size_t smem) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<grid, threads, smem, stream>>>(p);
    return cudaGetLastError();
  };
  const dim3 by_block(p.nb, p.hk);
  const int threads = 32 * group;
  const size_t smem = DFlashMmaSmemBytes(true, group, p.d);
  if (p.delta == nullptr)
    return p.d == 64 ? launch(dflash_mma_bwd<64, false>, by_block, threads, smem)
                     : launch(dflash_mma_bwd<128, false>, by_block, threads, smem);
  const cudaError_t e = plan.query_backward == DFlashKernel::kWgmma
                            ? LaunchDFlashWgmmaQueryBackward(p, stream)
                        : p.d == 64 ? launch(dflash_mma_bwd<64, true>, by_block, threads, smem)
                                    : launch(dflash_mma_bwd<128, true>, by_block, threads, smem);
  if (e != cudaSuccess || p.t == 0) return e;
  if (plan.context_backward == DFlashKernel::kWgmma) return LaunchDFlashWgmmaCtx(p, stream);
  const dim3 by_key((p.t + kTk - 1) / kTk, p.hk);
  const size_t ctx_smem = DFlashMmaCtxSmemBytes(p.d);
  return p.d == 64 ? launch(dflash_mma_bwd_ctx<64>, by_key, 32 * kCtxWarps, ctx_smem)
                   : launch(dflash_mma_bwd_ctx<128>, by_key, 32 * kCtxWarps, ctx_smem);
}

}  // namespace tandem::kernels::attention_internal
