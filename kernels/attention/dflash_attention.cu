// DFlash block attention on CUDA, forward and backward (SIMT, fp32 math on bf16 data).
//
// Algorithm. One CTA per (block b, KV head g) holds all R = 16 * G query rows of the block
// for the G query heads sharing KV head g (row r = local_head * 16 + slot). Each row is owned
// by TPR consecutive lanes; lane `part` owns dims part + TPR * i (i < DS = d / TPR), so a
// warp's loads from a shared K/V row are conflict-free and rows share them by broadcast.
// Keys stream through shared memory in tiles of kTileKeys: first the context range
// [lo, anchor) the block's slots see together, then the block's own 16 keys; each row masks
// them with its own bounds (the window per query position, causal_in_block).
//   forward:  online softmax in the log2 domain; a row's score is a TPR-lane shuffle sum.
//   backward: per tile, each row computes p = exp(s - lse) and ds = p (dO.v - rowsum(dO*O)),
//             accumulates dQ in registers and stores p and ds in shared memory; then the CTA
//             reduces dK = scale * ds^T Q and dV = p^T dO over its rows, one output per
//             thread, and writes block-key grads directly (only this CTA touches them) and
//             context-key grads with fp32 atomicAdd (several blocks share context keys).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention/dflash_internal.h"

namespace tandem::kernels::attention_internal {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

using Params = DFlashKernelParams;

__device__ inline const __nv_bfloat16* Bf(const void* x) {
  return static_cast<const __nv_bfloat16*>(x);
}
__device__ inline __nv_bfloat16* Bf(void* x) { return static_cast<__nv_bfloat16*>(x); }

// Context range [lo, hi) of block b: the union of its slots' ranges (slot 0 reaches
// furthest back), clamped to [0, t] so a bad anchor cannot read out of bounds (the CPU
// reference rejects such anchors). hi is the anchor.
__device__ inline void ContextRange(const Params& p, int b, int* lo, int* hi) {
  const int a = min(max(p.anchors[b], 0), p.t);
  const int s = min(max(p.doc_start[b], 0), a);
  *hi = a;
  *lo = max(s, WindowFloor(a, p.window));
}

// Whether row `slot` sees key j of a tile starting at key `first` (a context tile, or the
// block's own keys when blk): the window per query position and causal_in_block.
__device__ inline bool KeyVisible(const Params& p, bool blk, int first, int j, int slot, int a) {
  if (blk) return (!p.causal || j <= slot) && j - slot >= WindowFloor(0, p.window);
  return first + j - slot >= WindowFloor(a, p.window);
}

// Loads n (<= kTileKeys) key rows and value rows of KV head g into shared fp32 tiles
// [kTileKeys][d]; rows come from (k, v) at row index first + j, head g.
__device__ inline void LoadTile(const __nv_bfloat16* k, const __nv_bfloat16* v, int first, int n,
                                int g, int hk, int d, float* ks, float* vs) {
  const int chunks = d / 8;
  for (int e = threadIdx.x; e < n * chunks; e += blockDim.x) {
    const int j = e / chunks, c = (e % chunks) * 8;
    const size_t off = (static_cast<size_t>(first + j) * hk + g) * d + c;
    const uint4 kr = *reinterpret_cast<const uint4*>(k + off);
    const uint4 vr = *reinterpret_cast<const uint4*>(v + off);
    const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&kr);
    const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(&vr);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 kf = __bfloat1622float2(k2[i]);
      const float2 vf = __bfloat1622float2(v2[i]);
      ks[j * d + c + 2 * i] = kf.x;
      ks[j * d + c + 2 * i + 1] = kf.y;
      vs[j * d + c + 2 * i] = vf.x;
      vs[j * d + c + 2 * i + 1] = vf.y;
    }
  }
}

// Sum over the TPR lanes owning one row (TPR a power of two <= 32, groups warp-aligned).
__device__ inline float RowSum(float x, int tpr) {
  for (int off = tpr >> 1; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// __launch_bounds__(1024): PlanLaunch allows up to 1024 threads (16 rows x GQA group x TPR),
// so registers are capped to what such a CTA can get; the fallback may spill, but it launches.
template <int DS>
__global__ void __launch_bounds__(1024) dflash_fwd_kernel(Params p) {
  extern __shared__ float smem[];
  const int d = p.d, tpr = d / DS, group = p.hq / p.hk;
  float* ks = smem;                   // [kTileKeys][d]
  float* vs = smem + kTileKeys * d;   // [kTileKeys][d]
  const int b = blockIdx.x, g = blockIdx.y;
  const int row = threadIdx.x / tpr, part = threadIdx.x % tpr;
  const int slot = row % kBlock, head = g * group + row / kBlock;
  const size_t qoff = (static_cast<size_t>(b * kBlock + slot) * p.hq + head) * d;

  float q[DS], acc[DS];
  const float qscale = p.scale * kLog2e;
#pragma unroll
  for (int i = 0; i < DS; ++i) {
    q[i] = __bfloat162float(Bf(p.q)[qoff + part + tpr * i]) * qscale;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  int lo, hi;
  ContextRange(p, b, &lo, &hi);
  const int ctx_tiles = (hi - lo + kTileKeys - 1) / kTileKeys;
  for (int tile = 0; tile <= ctx_tiles; ++tile) {
    const bool blk = tile == ctx_tiles;
    const int first = blk ? b * kBlock : lo + tile * kTileKeys;
    const int n = blk ? kBlock : min(kTileKeys, hi - first);
    __syncthreads();  // the previous tile is consumed
    LoadTile(Bf(blk ? p.kb : p.kc), Bf(blk ? p.vb : p.vc), first, n, g, p.hk, d, ks, vs);
    __syncthreads();
    for (int j0 = 0; j0 < n; j0 += 8) {
      float s[8];
      float mx = m;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const int j = j0 + jj;
        s[jj] = -INFINITY;
        if (j < n) {  // uniform across the CTA: every lane reaches the shuffles
          const float* kr = ks + j * d + part;
          float dot = 0.0f;
#pragma unroll
          for (int i = 0; i < DS; ++i) dot += q[i] * kr[tpr * i];
          dot = RowSum(dot, tpr);
          s[jj] = KeyVisible(p, blk, first, j, slot, hi) ? dot : -INFINITY;
          mx = fmaxf(mx, s[jj]);
        }
      }
      // A row may see nothing in a chunk (keys below its window); the guard keeps it at 0
      // instead of NaN without diverging before the next shuffles.
      const float mref = mx == -INFINITY ? 0.0f : mx;
      const float f = exp2f(m - mref);  // m == -inf gives 0
      l *= f;
#pragma unroll
      for (int i = 0; i < DS; ++i) acc[i] *= f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float w = exp2f(s[jj] - mref);  // masked or absent keys give 0
        if (w == 0.0f) continue;
        l += w;
        const float* vr = vs + (j0 + jj) * d + part;
#pragma unroll
        for (int i = 0; i < DS; ++i) acc[i] += w * vr[tpr * i];
      }
      m = mx;
    }
  }
  // Every slot sees at least its own block key, so l >= 1.
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < DS; ++i) Bf(p.out)[qoff + part + tpr * i] = __float2bfloat16(acc[i] * inv);
  if (part == 0)
    p.lse[static_cast<size_t>(b * kBlock + slot) * p.hq + head] =
        (m + log2f(l)) / kLog2e;
}

template <int DS>
__global__ void __launch_bounds__(1024) dflash_bwd_kernel(Params p) {
  extern __shared__ float smem[];
  const int d = p.d, tpr = d / DS, group = p.hq / p.hk, rows = kBlock * group;
  float* ks = smem;                          // [kTileKeys][d]
  float* vs = ks + kTileKeys * d;            // [kTileKeys][d]
  float* qs = vs + kTileKeys * d;            // [rows][d]
  float* dos = qs + rows * d;                // [rows][d]
  float* ps = dos + rows * d;                // [rows][kTileStride]
  float* dss = ps + rows * kTileStride;      // [rows][kTileStride]
  const int b = blockIdx.x, g = blockIdx.y;
  const int row = threadIdx.x / tpr, part = threadIdx.x % tpr;
  const int slot = row % kBlock, head = g * group + row / kBlock;
  const size_t qrow = static_cast<size_t>(b * kBlock + slot) * p.hq + head;
  const size_t qoff = qrow * d;

  float q[DS], dout[DS], dq[DS];
  const float qscale = p.scale * kLog2e;
  float delta = 0.0f;
#pragma unroll
  for (int i = 0; i < DS; ++i) {
    const int c = part + tpr * i;
    const float qv = __bfloat162float(Bf(p.q)[qoff + c]);
    dout[i] = __bfloat162float(Bf(p.dout)[qoff + c]);
    delta += dout[i] * __bfloat162float(Bf(p.o_in)[qoff + c]);
    q[i] = qv * qscale;
    dq[i] = 0.0f;
    qs[row * d + c] = qv;
    dos[row * d + c] = dout[i];
  }
  delta = RowSum(delta, tpr);
  const float lse2 = p.lse_in[qrow] * kLog2e;

  int lo, hi;
  ContextRange(p, b, &lo, &hi);
  const int ctx_tiles = (hi - lo + kTileKeys - 1) / kTileKeys;
  for (int tile = 0; tile <= ctx_tiles; ++tile) {
    const bool blk = tile == ctx_tiles;
    const int first = blk ? b * kBlock : lo + tile * kTileKeys;
    const int n = blk ? kBlock : min(kTileKeys, hi - first);
    __syncthreads();  // previous tile's ks/vs/ps/dss are consumed (and qs/dos written)
    LoadTile(Bf(blk ? p.kb : p.kc), Bf(blk ? p.vb : p.vc), first, n, g, p.hk, d, ks, vs);
    __syncthreads();
    for (int j = 0; j < n; ++j) {
      const float* kr = ks + j * d + part;
      const float* vr = vs + j * d + part;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int i = 0; i < DS; ++i) {
        s += q[i] * kr[tpr * i];
        dp += dout[i] * vr[tpr * i];
      }
      s = RowSum(s, tpr);
      dp = RowSum(dp, tpr);
      const float pr = KeyVisible(p, blk, first, j, slot, hi) ? exp2f(s - lse2) : 0.0f;
      const float ds = pr * (dp - delta);
#pragma unroll
      for (int i = 0; i < DS; ++i) dq[i] += ds * kr[tpr * i];
      if (part == 0) {
        ps[row * kTileStride + j] = pr;
        dss[row * kTileStride + j] = ds;
      }
    }
    __syncthreads();
    // One (key j, dim c) output per thread and step; a warp shares j (d % 32 == 0).
    for (int e = threadIdx.x; e < n * d; e += blockDim.x) {
      const int j = e / d, c = e % d;
      float dv = 0.0f, dk = 0.0f;
      for (int r = 0; r < rows; ++r) {
        dv += ps[r * kTileStride + j] * dos[r * d + c];
        dk += dss[r * kTileStride + j] * qs[r * d + c];
      }
      dk *= p.scale;
      const size_t off = (static_cast<size_t>(first + j) * p.hk + g) * d + c;
      if (blk) {
        Bf(p.dkb)[off] = __float2bfloat16(dk);
        Bf(p.dvb)[off] = __float2bfloat16(dv);
      } else {
        atomicAdd(p.dkc + off, dk);
        atomicAdd(p.dvc + off, dv);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < DS; ++i) Bf(p.dq)[qoff + part + tpr * i] = __float2bfloat16(dq[i] * p.scale);
}

}  // namespace

cudaError_t LaunchDFlashKernel(const DFlashKernelParams& p, bool backward, int ds, int threads,
                               size_t smem, cudaStream_t stream) {
  auto launch = [&](auto kernel) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    kernel<<<dim3(p.nb, p.hk), threads, smem, stream>>>(p);
    return cudaGetLastError();
  };
  switch (ds) {
    case 4: return backward ? launch(dflash_bwd_kernel<4>) : launch(dflash_fwd_kernel<4>);
    case 8: return backward ? launch(dflash_bwd_kernel<8>) : launch(dflash_fwd_kernel<8>);
    case 16: return backward ? launch(dflash_bwd_kernel<16>) : launch(dflash_fwd_kernel<16>);
    case 32: return backward ? launch(dflash_bwd_kernel<32>) : launch(dflash_fwd_kernel<32>);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tandem::kernels::attention_internal
