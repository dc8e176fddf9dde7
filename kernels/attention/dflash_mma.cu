// DFlash block attention forward on tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate); same contract as the SIMT kernel in dflash_attention.cu.
//
// One CTA per (block b, KV head g) with G = hq / hk warps; warp w owns the 16 query slots of
// query head g * G + w (an m16 tile). Keys stream through shared memory in tiles of 64: the
// context range [lo, anchor) first, then the block's own 16 keys (causal per slot when
// causal_in_block). cp.async double buffer; S = Q K^T, online softmax in the log2 domain,
// O += P V with P re-packed from the S accumulators as the A operand.
#include "kernels/attention/dflash_mma_device.cuh"

namespace tandem::kernels::attention_internal {
namespace {

using namespace mma;  // NOLINT(build/namespaces): the kernels' own device helpers

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

}  // namespace

cudaError_t LaunchDFlashMmaForward(const DFlashKernelParams& p, cudaStream_t stream) {
  const int group = p.hq / p.hk;
  const size_t smem = DFlashMmaSmemBytes(false, group, p.d);
  auto launch = [&](auto kernel) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.nb, p.hk), 32 * group, smem, stream>>>(p);
    return cudaGetLastError();
  };
  if (!DFlashMmaSupported(group, p.d) || group * p.hk != p.hq) return cudaErrorInvalidValue;
  return p.d == 64 ? launch(dflash_mma_fwd<64>) : launch(dflash_mma_fwd<128>);
}

}  // namespace tandem::kernels::attention_internal
