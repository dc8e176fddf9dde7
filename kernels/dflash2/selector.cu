// CUDA selector kernels (selector.h). A row (draft position) belongs to one warp: slots j and
// j + 32 of its k <= 64 candidates live in lane j. Scores: the warp writes
// ap = pred[prev] * proj[row] into its shared memory once, then reduces each candidate's
// dot with succ[id] across the lanes (bf16x8 loads when Rk % 8 == 0). Warp sums are xor
// butterflies, so every lane holds the same bits and every result is a fixed-order sum.
// Loss: per-CTA partial sums over a fixed row range, one CTA adds the partials in a fixed
// order, then the gradient pass; the partials travel in dscores (each CTA's first four
// values), which the gradient pass overwrites: no workspace, deterministic. Backward: the
// warp sums S[q] = sum_j g_j succ[id_j, q] in registers (dproj = pred[prev] * S, overwritten)
// and adds into dpred / dsucc with float atomics. CandidateHeadBackward: one CTA per row, each
// thread a bf16x8 column chunk summed over the k LM-head rows in fp32.
#include "kernels/dflash2/selector_device.cuh"
#include "kernels/dflash2/selector_kernels.h"

namespace tandem::kernels::dflash2 {
namespace {

using selector_detail::bf16_t;
using selector_detail::kFull;
using selector_detail::kWarps;
using selector_detail::RowArgmax;
using selector_detail::RowGrid;
using selector_detail::RowScores;
using selector_detail::Vec8;
using selector_detail::WarpMax;
using selector_detail::WarpSum;

template <typename P, bool kVec8>
__global__ void __launch_bounds__(kWarps * 32)
    selector_scores_kernel(float* scores, const P* proj, const bf16_t* pred, const bf16_t* succ,
                           const int32_t* prev, const int32_t* ids, const float* unary,
                           SelectorLaunchDims d) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ap = smem + warp * d.rank;
  for (int64_t row = int64_t{blockIdx.x} * kWarps + warp; row < d.rows;
       row += int64_t{gridDim.x} * kWarps) {
    float s[2];
    RowScores<P, kVec8>(s, ap, proj, pred, succ, prev[row], ids, unary, row, d, lane);
    if (lane < d.k) scores[row * d.k + lane] = s[0];
    if (lane + 32 < d.k) scores[row * d.k + lane + 32] = s[1];
  }
}

// ---- Loss -------------------------------------------------------------------------------

constexpr int kLossWarps = 8;
constexpr int64_t kLossRowsPerCta = 64;  // >= 4: a CTA's dscores range holds its partials
constexpr int kReduceThreads = 256;

struct RowLoss {
  float wc = 0.f;   // w * c
  float wce = 0.f;  // w * c * CE
  int covered = 0, correct = 0, target_slot = -1;
  float lse = 0.f;
};

// One row's loss terms (every lane gets the same); s: the lane's two scores.
__device__ RowLoss LossRow(float (&s)[2], const float* scores, const int32_t* ids,
                           const int32_t* targets, const float* weights, int64_t row, int k,
                           int lane) {
  RowLoss out;
  const int32_t t = targets[row];
  const bool v0 = lane < k, v1 = lane + 32 < k;
  s[0] = v0 ? scores[row * k + lane] : -INFINITY;
  s[1] = v1 ? scores[row * k + lane + 32] : -INFINITY;
  const unsigned m0 = __ballot_sync(kFull, v0 && ids[row * k + lane] == t);
  const unsigned m1 = __ballot_sync(kFull, v1 && ids[row * k + lane + 32] == t);
  const int y = m0 ? __ffs(m0) - 1 : (m1 ? 32 + __ffs(m1) - 1 : -1);
  const float w = weights[row];
  if (y < 0 || !(w > 0.f)) return out;
  const float m = WarpMax(fmaxf(s[0], s[1]));
  const float z = WarpSum((v0 ? expf(s[0] - m) : 0.f) + (v1 ? expf(s[1] - m) : 0.f));
  out.lse = m + logf(z);
  const float sy = __shfl_sync(kFull, y < 32 ? s[0] : s[1], y % 32);
  out.wc = w;
  out.wce = w * (out.lse - sy);
  out.covered = 1;
  out.correct = RowArgmax(s, lane, k) == y;
  out.target_slot = y;
  return out;
}

// Partial sums of a CTA's rows, in a fixed order (per warp by row, then by warp).
struct LossSums {
  float wc, wce;
  int covered, correct;
};

enum LossMode { kFused = 0, kPartial = 1, kGradient = 2 };

// Rows [r0, r1) of this CTA (CTA b: [b * per, b + 1 == nb ? R : (b + 1) * per)).
template <int kMode>
__global__ void __launch_bounds__(kLossWarps * 32)
    selector_loss_kernel(float* loss, int32_t* stats, float* dscores, const float* scores,
                         const int32_t* ids, const int32_t* targets, const float* weights,
                         float scale, int64_t rows, int k, int64_t per) {
  __shared__ LossSums part[kLossWarps];
  __shared__ float coef_s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r0 = int64_t{blockIdx.x} * per;
  const int64_t r1 = blockIdx.x + 1 == gridDim.x ? rows : r0 + per;
  float* region = dscores + r0 * k;
  if constexpr (kMode != kGradient) {
    LossSums acc{0.f, 0.f, 0, 0};
    for (int64_t row = r0 + warp; row < r1; row += kLossWarps) {
      float s[2];
      const RowLoss l = LossRow(s, scores, ids, targets, weights, row, k, lane);
      acc.wc += l.wc, acc.wce += l.wce, acc.covered += l.covered, acc.correct += l.correct;
    }
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      LossSums t{0.f, 0.f, 0, 0};
      for (int i = 0; i < kLossWarps; ++i)
        t.wc += part[i].wc, t.wce += part[i].wce, t.covered += part[i].covered,
            t.correct += part[i].correct;
      if constexpr (kMode == kPartial) {
        region[0] = t.wce, region[1] = t.wc;
        region[2] = __int_as_float(t.covered), region[3] = __int_as_float(t.correct);
      } else {
        loss[0] = t.wc > 0.f ? t.wce / t.wc : 0.f;
        stats[0] = t.covered, stats[1] = t.correct;
        coef_s = t.wc > 0.f ? scale / t.wc : 0.f;
      }
    }
    if constexpr (kMode == kPartial) return;
  } else {
    if (threadIdx.x == 0) coef_s = region[0];  // left there by selector_loss_reduce_kernel
  }
  __syncthreads();
  const float coef = coef_s;
  for (int64_t row = r0 + warp; row < r1; row += kLossWarps) {
    float s[2];
    const RowLoss l = LossRow(s, scores, ids, targets, weights, row, k, lane);
    const float c = coef * l.wc;  // 0 for rows not covered
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = lane + 32 * h;
      if (j < k)
        dscores[row * k + j] = l.covered ? c * (expf(s[h] - l.lse) - (j == l.target_slot ? 1.f : 0.f)) : 0.f;
    }
  }
}

// One CTA: adds the nb partials in a fixed order, writes loss and stats, and leaves
// scale / denominator (0 when it is 0) at each CTA's region[0] for the gradient pass.
__global__ void __launch_bounds__(kReduceThreads)
    selector_loss_reduce_kernel(float* loss, int32_t* stats, float* dscores, int k, int64_t per,
                                int64_t nb, float scale) {
  __shared__ LossSums part[kReduceThreads];
  __shared__ float coef_s;
  LossSums acc{0.f, 0.f, 0, 0};
  for (int64_t b = threadIdx.x; b < nb; b += kReduceThreads) {
    const float* region = dscores + b * per * k;
    acc.wce += region[0], acc.wc += region[1];
    acc.covered += __float_as_int(region[2]), acc.correct += __float_as_int(region[3]);
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    LossSums t{0.f, 0.f, 0, 0};
    for (int i = 0; i < kReduceThreads; ++i)
      t.wc += part[i].wc, t.wce += part[i].wce, t.covered += part[i].covered,
          t.correct += part[i].correct;
    loss[0] = t.wc > 0.f ? t.wce / t.wc : 0.f;
    stats[0] = t.covered, stats[1] = t.correct;
    coef_s = t.wc > 0.f ? scale / t.wc : 0.f;
  }
  __syncthreads();
  for (int64_t b = threadIdx.x; b < nb; b += kReduceThreads) dscores[b * per * k] = coef_s;
}

}  // namespace

cudaError_t LaunchSelectorScores(float* scores, const void* proj, bool proj_bf16,
                                 const void* pred, const void* succ, const int32_t* prev,
                                 const int32_t* ids, const float* unary,
                                 const SelectorLaunchDims& d, Stream s) {
  const unsigned grid = RowGrid(d.rows, kWarps);
  const size_t smem = sizeof(float) * kWarps * d.rank;
  const auto* a = static_cast<const bf16_t*>(pred);
  const auto* b = static_cast<const bf16_t*>(succ);
  const bool v8 = Vec8(d.rank, {succ});
  if (proj_bf16) {
    const auto* p = static_cast<const bf16_t*>(proj);
    if (v8)
      selector_scores_kernel<bf16_t, true><<<grid, kWarps * 32, smem, s>>>(scores, p, a, b, prev, ids, unary, d);
    else
      selector_scores_kernel<bf16_t, false><<<grid, kWarps * 32, smem, s>>>(scores, p, a, b, prev, ids, unary, d);
  } else {
    const auto* p = static_cast<const float*>(proj);
    if (v8)
      selector_scores_kernel<float, true><<<grid, kWarps * 32, smem, s>>>(scores, p, a, b, prev, ids, unary, d);
    else
      selector_scores_kernel<float, false><<<grid, kWarps * 32, smem, s>>>(scores, p, a, b, prev, ids, unary, d);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSelectorLoss(float* loss, int32_t* stats, float* dscores, const float* scores,
                               const int32_t* ids, const int32_t* targets, const float* weights,
                               float scale, int64_t rows, int k, Stream s) {
  const int threads = kLossWarps * 32;
  const int64_t nb = rows / kLossRowsPerCta;
  if (nb <= 1) {  // one CTA does it all
    selector_loss_kernel<kFused><<<1, threads, 0, s>>>(loss, stats, dscores, scores, ids, targets,
                                                       weights, scale, rows, k, rows);
    return cudaGetLastError();
  }
  const unsigned grid = static_cast<unsigned>(nb);
  selector_loss_kernel<kPartial><<<grid, threads, 0, s>>>(loss, stats, dscores, scores, ids,
                                                          targets, weights, scale, rows, k,
                                                          kLossRowsPerCta);
  selector_loss_reduce_kernel<<<1, kReduceThreads, 0, s>>>(loss, stats, dscores, k,
                                                           kLossRowsPerCta, nb, scale);
  selector_loss_kernel<kGradient><<<grid, threads, 0, s>>>(loss, stats, dscores, scores, ids,
                                                           targets, weights, scale, rows, k,
                                                           kLossRowsPerCta);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::dflash2
