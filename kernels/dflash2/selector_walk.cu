// CUDA decode walks of the selector (selector.h): one warp per block of draft positions,
// walking its rows in order (each row's prev is the token chosen at the row before). A row's
// scores are computed as in the forward (selector_device.cuh). Greedy: the first slot with
// the highest score. Sampled: q = softmax(scores / T) (expf, warp sums), then every lane runs
// the same slot-order running sum over q against u = PhiloxUniform(seed, offset, row), so
// the choice is the CPU version's rule on the GPU's q.
#include "kernels/dflash2/selector_device.cuh"
#include "kernels/dflash2/selector_kernels.h"
#include "kernels/random/philox.h"

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

// The slot sampled from s (the lane's two scores) at `row`; writes q to probs.
__device__ int SampleSlot(const float (&s)[2], float* probs, int64_t row, int k, float temp,
                          uint64_t seed, uint64_t offset, int lane) {
  const bool v0 = lane < k, v1 = lane + 32 < k;
  const float m = WarpMax(fmaxf(v0 ? s[0] : -INFINITY, v1 ? s[1] : -INFINITY));
  const float e0 = v0 ? expf((s[0] - m) / temp) : 0.f;
  const float e1 = v1 ? expf((s[1] - m) / temp) : 0.f;
  const float z = WarpSum(e0 + e1);
  const float q0 = e0 / z, q1 = e1 / z;
  if (v0) probs[row * k + lane] = q0;
  if (v1) probs[row * k + lane + 32] = q1;
  const float u = PhiloxUniform(seed, offset, static_cast<uint64_t>(row));
  float cum = 0.f;
  int chosen = -1, last = 0;
  for (int j = 0; j < k; ++j) {
    const float qj = __shfl_sync(kFull, j < 32 ? q0 : q1, j % 32);
    if (qj > 0.f) last = j;
    cum += qj;
    if (chosen < 0 && u < cum) chosen = j;
  }
  return chosen < 0 ? last : chosen;
}

template <typename P, bool kVec8>
__global__ void __launch_bounds__(kWarps * 32)
    selector_walk_kernel(SelectorWalkArgs a, SelectorLaunchDims d, int64_t blocks) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ap = smem + warp * d.rank;
  const auto* proj = static_cast<const P*>(a.proj);
  const auto* pred = static_cast<const bf16_t*>(a.pred);
  const auto* succ = static_cast<const bf16_t*>(a.succ);
  for (int64_t b = int64_t{blockIdx.x} * kWarps + warp; b < blocks;
       b += int64_t{gridDim.x} * kWarps) {
    int64_t prev = a.anchors[b];
    for (int64_t i = 0; i < a.block_rows; ++i) {
      const int64_t row = b * a.block_rows + i;
      float s[2];
      RowScores<P, kVec8>(s, ap, proj, pred, succ, prev, a.ids, a.unary, row, d, lane);
      const int slot = a.probs == nullptr
                           ? RowArgmax(s, lane, d.k)
                           : SampleSlot(s, a.probs, row, d.k, a.temperature, a.seed, a.offset,
                                        lane);
      prev = a.ids[row * d.k + slot];
      if (lane == 0) a.path[row] = static_cast<int32_t>(prev);
    }
  }
}

}  // namespace

cudaError_t LaunchSelectorWalk(const SelectorWalkArgs& a, const SelectorLaunchDims& d, Stream s) {
  const int64_t blocks = d.rows / a.block_rows;
  const unsigned grid = RowGrid(blocks, kWarps);
  const size_t smem = sizeof(float) * kWarps * d.rank;
  const bool v8 = Vec8(d.rank, {a.succ});
  if (a.proj_bf16) {
    if (v8)
      selector_walk_kernel<bf16_t, true><<<grid, kWarps * 32, smem, s>>>(a, d, blocks);
    else
      selector_walk_kernel<bf16_t, false><<<grid, kWarps * 32, smem, s>>>(a, d, blocks);
  } else {
    if (v8)
      selector_walk_kernel<float, true><<<grid, kWarps * 32, smem, s>>>(a, d, blocks);
    else
      selector_walk_kernel<float, false><<<grid, kWarps * 32, smem, s>>>(a, d, blocks);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels::dflash2
