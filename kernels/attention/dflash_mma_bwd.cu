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

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers

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

cudaError_t LaunchDFlashMmaBackward(const DFlashKernelParams& p, cudaStream_t stream) {
  const int group = p.hq / p.hk;
  const size_t smem = DFlashMmaSmemBytes(true, group, p.d);
  auto launch = [&](auto kernel) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.nb, p.hk), 32 * group, smem, stream>>>(p);
    return cudaGetLastError();
  };
  if (!DFlashMmaSupported(group, p.d) || group * p.hk != p.hq) return cudaErrorInvalidValue;
  return p.d == 64 ? launch(dflash_mma_bwd<64>) : launch(dflash_mma_bwd<128>);
}

}  // namespace tandem::kernels::attention_internal
