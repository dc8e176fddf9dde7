// CUDA fused RMSNorm kernels (kernels/norm/fused_norm.h). Layout as rmsnorm.cu: a row belongs to
// `group` threads; thread `lane` owns vectors lane, lane + group, ... (at most kPer, kVec
// elements each) and keeps them in registers between the row reduction and the output.
// Groups of <= 32 threads reduce with warp shuffles and share a 256-thread block; larger
// groups are a whole block (BlockSum). Every thread of a block runs the same row iterations.
//   Per-head norm + RoPE: a thread's vector v covers dims v*kVec.. of the first half and
//   their rotation partners half + v*kVec.., so the rotation stays in registers; the
//   frequencies are a kernel argument staged in shared memory; sincosf as rope.cu.
//   Backwards accumulate dw for the thread's columns over the block's rows, combine the
//   block's groups in fixed order through shared memory into one partial row per block,
//   and LaunchRmsNormDwReduce (rmsnorm.cu) sums the partials in fixed order: deterministic.
#include <algorithm>

#include "kernels/core/device_props.h"
#include "kernels/elementwise/elementwise_vec.cuh"
#include "kernels/norm/fused_norm_kernels.h"
#include "kernels/norm/rmsnorm_kernels.h"

namespace tandem::kernels {
namespace {

using cuda_detail::BlockSum;
using cuda_detail::GroupSum;
using cuda_detail::LoadVec;
using cuda_detail::StoreVec;
using bf16_t = __nv_bfloat16;

constexpr int kMaxHalf = 256;    // largest d / 2 (kRopeMaxRotaryDim / 2)
constexpr int kGroupBlock = 256;  // threads per block when groups are <= 32 threads

struct InvFreq {
  float v[kMaxHalf];
};

__device__ __forceinline__ float RowSum(float v, int group, float* scratch) {
  return group <= 32 ? GroupSum(v, group) : BlockSum(v, scratch);
}

// Sums the per-group rows combine[rpb][cols] of a block into out[cols] (fixed order).
__device__ __forceinline__ void CombineGroups(float* out, const float* combine, int rpb,
                                              int cols) {
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float s = 0.f;
    for (int g = 0; g < rpb; ++g) s += combine[g * cols + c];
    out[c] = s;
  }
}

// y, x: [rows, d], rows = tokens * heads; pos: [tokens]; rstd: [rows] (nullable)
template <int kVec, int kPer>
__global__ void __launch_bounds__(kGroupBlock)
    norm_rope_fwd_kernel(bf16_t* y, float* rstd, const bf16_t* x, const bf16_t* w,
                         const int32_t* pos, InvFreq f, int64_t rows, int heads, int d,
                         int group, float eps) {
  __shared__ float inv[kMaxHalf];
  const int half = d / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) inv[i] = f.v[i];
  __syncthreads();
  const int nv = half / kVec, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = blockDim.x / group;
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    const bf16_t* xr = x + row * d;
    float x1[kPer][kVec], x2[kPer][kVec];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        LoadVec<kVec>(xr + v * kVec, x1[k]);
        LoadVec<kVec>(xr + half + v * kVec, x2[k]);
#pragma unroll
        for (int i = 0; i < kVec; ++i) ss += x1[k][i] * x1[k][i] + x2[k][i] * x2[k][i];
      }
    }
    ss = GroupSum(ss, group);
    const float r = rsqrtf(ss / d + eps);
    const float p = valid ? static_cast<float>(pos[row / heads]) : 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        float w1[kVec], w2[kVec], o1[kVec], o2[kVec];
        LoadVec<kVec>(w + v * kVec, w1);
        LoadVec<kVec>(w + half + v * kVec, w2);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const float n1 = x1[k][i] * r * w1[i], n2 = x2[k][i] * r * w2[i];
          float sn, cs;
          sincosf(p * inv[v * kVec + i], &sn, &cs);
          o1[i] = n1 * cs - n2 * sn;
          o2[i] = n2 * cs + n1 * sn;
        }
        StoreVec<kVec>(y + row * d + v * kVec, o1);
        StoreVec<kVec>(y + row * d + half + v * kVec, o2);
      }
    }
    if (valid && lane == 0 && rstd != nullptr) rstd[row] = r;
  }
}

// dx, dy, x: [rows, d]; partial: [gridDim.x, d]; rstd: [rows]; pos: [tokens]
template <int kVec, int kPer>
__global__ void __launch_bounds__(kGroupBlock)
    rope_norm_bwd_kernel(bf16_t* dx, float* partial, const bf16_t* dy, const bf16_t* x,
                         const bf16_t* w, const float* rstd, const int32_t* pos, InvFreq f,
                         int64_t rows, int heads, int d, int group) {
  extern __shared__ float combine[];  // [rpb, d] when rpb > 1
  __shared__ float inv[kMaxHalf];
  const int half = d / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) inv[i] = f.v[i];
  __syncthreads();
  const int nv = half / kVec, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = blockDim.x / group;
  float acc1[kPer][kVec], acc2[kPer][kVec];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc1[k][i] = acc2[k][i] = 0.f;
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    const float p = valid ? static_cast<float>(pos[row / heads]) : 0.f;
    float g1[kPer][kVec], g2[kPer][kVec], x1[kPer][kVec], x2[kPer][kVec];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        float d1[kVec], d2[kVec], w1[kVec], w2[kVec];
        LoadVec<kVec>(dy + row * d + v * kVec, d1);
        LoadVec<kVec>(dy + row * d + half + v * kVec, d2);
        LoadVec<kVec>(x + row * d + v * kVec, x1[k]);
        LoadVec<kVec>(x + row * d + half + v * kVec, x2[k]);
        LoadVec<kVec>(w + v * kVec, w1);
        LoadVec<kVec>(w + half + v * kVec, w2);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          float sn, cs;
          sincosf(p * inv[v * kVec + i], &sn, &cs);
          g1[k][i] = d1[i] * cs + d2[i] * sn;  // rotation by -angle
          g2[k][i] = d2[i] * cs - d1[i] * sn;
          dot += g1[k][i] * w1[i] * x1[k][i] + g2[k][i] * w2[i] * x2[k][i];
        }
      }
    }
    dot = GroupSum(dot, group);
    const float r = valid ? rstd[row] : 0.f;
    const float c = r * r * dot / d;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        float w1[kVec], w2[kVec], o1[kVec], o2[kVec];
        LoadVec<kVec>(w + v * kVec, w1);
        LoadVec<kVec>(w + half + v * kVec, w2);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          o1[i] = r * (g1[k][i] * w1[i] - x1[k][i] * c);
          o2[i] = r * (g2[k][i] * w2[i] - x2[k][i] * c);
          acc1[k][i] += g1[k][i] * x1[k][i] * r;
          acc2[k][i] += g2[k][i] * x2[k][i] * r;
        }
        StoreVec<kVec>(dx + row * d + v * kVec, o1);
        StoreVec<kVec>(dx + row * d + half + v * kVec, o2);
      }
    }
  }
  float* out = partial + int64_t{blockIdx.x} * d;
  float* dst = rpb == 1 ? out : combine + sub * d;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int v = lane + k * group;
    if (v < nv)
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        dst[v * kVec + i] = acc1[k][i];
        dst[half + v * kVec + i] = acc2[k][i];
      }
  }
  if (rpb > 1) CombineGroups(out, combine, rpb, d);
}

// hsum, y, a, b: [rows, h]; rstd: [rows] (nullable). hsum may alias a or b. With b null
// the row is a itself (exact: a is bf16) and hsum must be null: y = rmsnorm(a) with the
// same arithmetic as the fused call.
template <int kVec, int kPer>
__global__ void __launch_bounds__(512)
    add_norm_fwd_kernel(bf16_t* hsum, bf16_t* y, float* rstd, const bf16_t* a, const bf16_t* b,
                        const bf16_t* w, int64_t rows, int h, int group, float eps) {
  __shared__ float scratch[32];
  const int nv = h / kVec, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = group <= 32 ? blockDim.x / group : 1;
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    float hv[kPer][kVec];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        LoadVec<kVec>(a + row * h + v * kVec, hv[k]);
        if (b != nullptr) {
          float bv[kVec];
          LoadVec<kVec>(b + row * h + v * kVec, bv);
#pragma unroll
          for (int i = 0; i < kVec; ++i)
            hv[k][i] = __bfloat162float(__float2bfloat16_rn(hv[k][i] + bv[i]));  // as stored
        }
#pragma unroll
        for (int i = 0; i < kVec; ++i) ss += hv[k][i] * hv[k][i];
      }
    }
    ss = RowSum(ss, group, scratch);
    const float r = rsqrtf(ss / h + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        float wv[kVec], o[kVec];
        LoadVec<kVec>(w + v * kVec, wv);
#pragma unroll
        for (int i = 0; i < kVec; ++i) o[i] = hv[k][i] * r * wv[i];
        if (hsum != nullptr) StoreVec<kVec>(hsum + row * h + v * kVec, hv[k]);
        StoreVec<kVec>(y + row * h + v * kVec, o);
      }
    }
    if (valid && lane == 0 && rstd != nullptr) rstd[row] = r;
  }
}

// dres, x: [rows, h] bf16; dy: [rows, h] DyT; partial: [gridDim.x, h]; rstd: [rows]
template <typename DyT, int kVec, int kPer>
__global__ void __launch_bounds__(512)
    norm_bwd_add_kernel(bf16_t* dres, float* partial, const DyT* dy, const bf16_t* x,
                        const bf16_t* w, const float* rstd, int64_t rows, int h, int group) {
  extern __shared__ float combine[];  // [rpb, h] when rpb > 1
  __shared__ float scratch[32];
  const int nv = h / kVec, lane = threadIdx.x % group, sub = threadIdx.x / group;
  const int rpb = group <= 32 ? blockDim.x / group : 1;
  float acc[kPer][kVec];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[k][i] = 0.f;
  for (int64_t base = int64_t{blockIdx.x} * rpb; base < rows; base += int64_t{gridDim.x} * rpb) {
    const int64_t row = base + sub;
    const bool valid = row < rows;
    float g[kPer][kVec], xv[kPer][kVec], rv[kPer][kVec];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        float wv[kVec];
        LoadVec<kVec>(dy + row * h + v * kVec, g[k]);
        LoadVec<kVec>(x + row * h + v * kVec, xv[k]);
        LoadVec<kVec>(dres + row * h + v * kVec, rv[k]);
        LoadVec<kVec>(w + v * kVec, wv);
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot += g[k][i] * wv[i] * xv[k][i];
      }
    }
    dot = RowSum(dot, group, scratch);
    const float r = valid ? rstd[row] : 0.f;
    const float c = r * r * dot / h;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int v = lane + k * group;
      if (valid && v < nv) {
        float wv[kVec], o[kVec];
        LoadVec<kVec>(w + v * kVec, wv);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          o[i] = rv[k][i] + r * (g[k][i] * wv[i] - xv[k][i] * c);
          acc[k][i] += g[k][i] * xv[k][i] * r;
        }
        StoreVec<kVec>(dres + row * h + v * kVec, o);
      }
    }
  }
  float* out = partial + int64_t{blockIdx.x} * h;
  float* dst = rpb == 1 ? out : combine + sub * h;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int v = lane + k * group;
    if (v < nv)
#pragma unroll
      for (int i = 0; i < kVec; ++i) dst[v * kVec + i] = acc[k][i];
  }
  if (rpb > 1) CombineGroups(out, combine, rpb, h);
}

// Row split: `group` threads per row (a power of two <= 32, several rows per 256-thread
// block) or, when a row needs more, one row per block of `group` threads (multiple of 32).
struct Layout {
  int group, threads, rpb;
};

Layout LayoutFor(int64_t vectors, int per) {
  const int64_t need = std::max<int64_t>(1, (vectors + per - 1) / per);
  if (need <= 32) {
    int g = 1;
    while (g < need) g *= 2;
    return Layout{g, kGroupBlock, kGroupBlock / g};
  }
  const int g = static_cast<int>((need + 31) / 32 * 32);
  return Layout{g, g, 1};
}

InvFreq Table(const float* inv_freq, int half) {
  InvFreq f{};
  for (int i = 0; i < half; ++i) f.v[i] = inv_freq[i];
  return f;
}

cudaError_t Reduce(float* dw, const float* workspace, int64_t blocks, int64_t cols, Stream s) {
  return LaunchRmsNormDwReduce(dw, workspace, blocks, cols, s);
}

// Blocks of a backward: at most as many as are resident at once (each streams its rows, so
// a second wave would only add a tail), at most workspace_rows (one partial dw row each).
template <typename Kernel>
cudaError_t BackwardBlocks(Kernel* kernel, const Layout& l, size_t smem, int64_t rows,
                           int64_t workspace_rows, int64_t* blocks) {
  const int sms = CurrentDeviceSmCount();
  int per_sm = 0;
  cudaError_t e;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, l.threads, smem)) !=
      cudaSuccess)
    return e;
  *blocks = std::max<int64_t>(1, std::min({(rows + l.rpb - 1) / l.rpb, workspace_rows,
                                           int64_t{sms} * std::max(per_sm, 1)}));
  return cudaSuccess;
}

template <int kVec, int kPer>
cudaError_t NormRopeFwd(void* y, float* rstd, const void* x, const void* w, const int32_t* pos,
                        const InvFreq& f, int64_t tokens, int64_t heads, int64_t d, float eps,
                        Stream s) {
  const Layout l = LayoutFor(d / 2 / kVec, kPer);
  if (l.group > 32) return cudaErrorInvalidValue;
  const int64_t rows = tokens * heads;
  const int64_t blocks =
      std::min<int64_t>((rows + l.rpb - 1) / l.rpb, int64_t{CurrentDeviceSmCount()} * 16);
  norm_rope_fwd_kernel<kVec, kPer><<<blocks, l.threads, 0, s>>>(
      static_cast<bf16_t*>(y), rstd, static_cast<const bf16_t*>(x),
      static_cast<const bf16_t*>(w), pos, f, rows, static_cast<int>(heads),
      static_cast<int>(d), l.group, eps);
  return cudaGetLastError();
}

template <int kVec, int kPer>
cudaError_t RopeNormBwd(void* dx, float* dw, const void* dy, const void* x, const void* w,
                        const float* rstd, const int32_t* pos, const InvFreq& f,
                        float* workspace, int64_t workspace_rows, int64_t tokens, int64_t heads,
                        int64_t d, Stream s) {
  const Layout l = LayoutFor(d / 2 / kVec, kPer);
  if (l.group > 32 || workspace_rows < 1) return cudaErrorInvalidValue;
  const int64_t rows = tokens * heads;
  const size_t smem = l.rpb > 1 ? sizeof(float) * l.rpb * d : 0;
  auto* kernel = rope_norm_bwd_kernel<kVec, kPer>;
  int64_t blocks = 0;
  cudaError_t e = BackwardBlocks(kernel, l, smem, rows, workspace_rows, &blocks);
  if (e != cudaSuccess) return e;
  kernel<<<blocks, l.threads, smem, s>>>(
      static_cast<bf16_t*>(dx), workspace, static_cast<const bf16_t*>(dy),
      static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(w), rstd, pos, f, rows,
      static_cast<int>(heads), static_cast<int>(d), l.group);
  e = cudaGetLastError();
  return e != cudaSuccess ? e : Reduce(dw, workspace, blocks, d, s);
}

template <int kVec, int kPer>
cudaError_t AddNormFwd(void* hsum, void* y, float* rstd, const void* a, const void* b,
                       const void* w, int64_t rows, int64_t h, float eps, Stream s) {
  const Layout l = LayoutFor(h / kVec, kPer);
  if (l.threads > 512) return cudaErrorInvalidValue;
  const int64_t blocks =
      std::min<int64_t>((rows + l.rpb - 1) / l.rpb, int64_t{CurrentDeviceSmCount()} * 16);
  add_norm_fwd_kernel<kVec, kPer><<<blocks, l.threads, 0, s>>>(
      static_cast<bf16_t*>(hsum), static_cast<bf16_t*>(y), rstd, static_cast<const bf16_t*>(a),
      static_cast<const bf16_t*>(b), static_cast<const bf16_t*>(w), rows, static_cast<int>(h),
      l.group, eps);
  return cudaGetLastError();
}

template <typename DyT, int kVec, int kPer>
cudaError_t NormBwdAdd(void* dres, float* dw, const void* dy, const void* x, const void* w,
                       const float* rstd, float* workspace, int64_t workspace_rows, int64_t rows,
                       int64_t h, Stream s) {
  const Layout l = LayoutFor(h / kVec, kPer);
  if (l.threads > 512 || workspace_rows < 1) return cudaErrorInvalidValue;
  const size_t smem = l.rpb > 1 ? sizeof(float) * l.rpb * h : 0;
  auto* kernel = norm_bwd_add_kernel<DyT, kVec, kPer>;
  int64_t blocks = 0;
  cudaError_t e = BackwardBlocks(kernel, l, smem, rows, workspace_rows, &blocks);
  if (e != cudaSuccess) return e;
  kernel<<<blocks, l.threads, smem, s>>>(
      static_cast<bf16_t*>(dres), workspace, static_cast<const DyT*>(dy),
      static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(w), rstd, rows,
      static_cast<int>(h), l.group);
  e = cudaGetLastError();
  return e != cudaSuccess ? e : Reduce(dw, workspace, blocks, h, s);
}

template <typename DyT>
cudaError_t NormBwdAddAny(void* dres, float* dw, const void* dy, const void* x, const void* w,
                          const float* rstd, float* workspace, int64_t workspace_rows,
                          int64_t rows, int64_t h, Stream s) {
  if (h % 8 == 0 && cuda_detail::Aligned16({dres, dy, x, w})) {
    if (h <= 512 * 2 * 8)
      return NormBwdAdd<DyT, 8, 2>(dres, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h,
                                   s);
    return NormBwdAdd<DyT, 8, 4>(dres, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
  }
  return NormBwdAdd<DyT, 1, 32>(dres, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
}

}  // namespace

cudaError_t LaunchRmsNormRopeForward(void* y, float* rstd, const void* x, const void* w,
                                     const int32_t* pos, const float* inv_freq, int64_t tokens,
                                     int64_t heads, int64_t d, float eps, Stream s) {
  const int64_t half = d / 2;
  if (d % 2 != 0 || half > kMaxHalf) return cudaErrorInvalidValue;
  const InvFreq f = Table(inv_freq, static_cast<int>(half));
  if (half % 8 == 0 && cuda_detail::Aligned16({y, x, w}))
    return NormRopeFwd<8, 1>(y, rstd, x, w, pos, f, tokens, heads, d, eps, s);
  return NormRopeFwd<1, 8>(y, rstd, x, w, pos, f, tokens, heads, d, eps, s);
}

cudaError_t LaunchRopeRmsNormBackward(void* dx, float* dw, const void* dy, const void* x,
                                      const void* w, const float* rstd, const int32_t* pos,
                                      const float* inv_freq, float* workspace,
                                      int64_t workspace_rows, int64_t tokens, int64_t heads,
                                      int64_t d, Stream s) {
  const int64_t half = d / 2;
  if (d % 2 != 0 || half > kMaxHalf) return cudaErrorInvalidValue;
  const InvFreq f = Table(inv_freq, static_cast<int>(half));
  if (half % 8 == 0 && cuda_detail::Aligned16({dx, dy, x, w}))
    return RopeNormBwd<8, 1>(dx, dw, dy, x, w, rstd, pos, f, workspace, workspace_rows, tokens,
                             heads, d, s);
  return RopeNormBwd<1, 8>(dx, dw, dy, x, w, rstd, pos, f, workspace, workspace_rows, tokens,
                           heads, d, s);
}

cudaError_t LaunchAddRmsNormForward(void* hsum, void* y, float* rstd, const void* a,
                                    const void* b, const void* w, int64_t rows, int64_t h,
                                    float eps, Stream s) {
  if (h % 8 == 0 && cuda_detail::Aligned16({hsum, y, a, b, w})) {
    if (h <= 512 * 2 * 8) return AddNormFwd<8, 2>(hsum, y, rstd, a, b, w, rows, h, eps, s);
    return AddNormFwd<8, 4>(hsum, y, rstd, a, b, w, rows, h, eps, s);
  }
  return AddNormFwd<1, 32>(hsum, y, rstd, a, b, w, rows, h, eps, s);
}

cudaError_t LaunchRmsNormBackwardAdd(void* dres, float* dw, const void* dy, bool dy_f32,
                                     const void* x, const void* w, const float* rstd,
                                     float* workspace, int64_t workspace_rows, int64_t rows,
                                     int64_t h, Stream s) {
  if (dy_f32)
    return NormBwdAddAny<float>(dres, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
  return NormBwdAddAny<bf16_t>(dres, dw, dy, x, w, rstd, workspace, workspace_rows, rows, h, s);
}

}  // namespace tandem::kernels
