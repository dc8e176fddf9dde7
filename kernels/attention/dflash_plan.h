// Internal to kernels/attention (and its tests and benches): which kernel runs each stage of
// the DFlash block attention, chosen once per call from the shape and the device
// (SelectDFlashPlan) and handed to the launchers, which run what the plan names.
// README.md in this folder gives the measurements behind the choice. Free of CUDA and runtime/
// headers: nvcc compiles it, and so do CPU-only builds.
// Thread-safety: constexpr functions of their arguments only.
#pragma once

#include <cstdint>

namespace tandem::kernels::attention_internal {

// Which kernel family a caller asks for.
//   kAuto:     the tensor-core kernels where they apply, else SIMT.
//   kSimt:     the SIMT kernels (dflash_attention.cu): any group, head_dim 64, 128 or 256.
//   kMma:      the tensor-core kernels; InvalidArgument where they do not apply. On a compute
//              capability 9 device the wgmma kernels take the shapes they cover.
//   kMmaSync:  kMma without wgmma: the mma.sync kernels for every stage (the fallback the
//              wgmma kernels are measured and tested against).
enum class DFlashPath : uint8_t { kAuto, kSimt, kMma, kMmaSync };

// The kernel family of one stage.
enum class DFlashKernel : uint8_t { kSimt, kMmaSync, kWgmma };

// Query heads per KV head of the wgmma kernels: one warpgroup's M = 64 rows = 4 heads x 16.
inline constexpr int kWgmmaGroup = 4;
// Query heads per KV head the mma.sync kernels take at most (one warp each).
inline constexpr int kMmaMaxGroup = 8;

// Whether the mma.sync kernels handle a (GQA group, head_dim) pair.
inline constexpr bool DFlashMmaSupported(int64_t group, int64_t d) {
  return group >= 1 && group <= kMmaMaxGroup && (d == 64 || d == 128);
}

// Whether the query-major wgmma kernels (forward, split backward) handle a (group, head_dim).
inline constexpr bool DFlashWgmmaQuerySupported(int64_t group, int64_t d) {
  return group == kWgmmaGroup && (d == 64 || d == 128);
}

// Whether the key-major wgmma context kernel handles a head_dim (any group mma.sync takes).
inline constexpr bool DFlashWgmmaCtxSupported(int64_t d) { return d == 128; }

// The kernels of one call. `query_backward` and `context_backward` are the split backward's
// two kernels (with a delta scratch); the fused backward (without one) runs `query_backward`'s
// family, mma.sync when that is kWgmma (the wgmma kernel needs the split).
struct DFlashPlan {
  DFlashKernel forward = DFlashKernel::kSimt;
  DFlashKernel query_backward = DFlashKernel::kSimt;
  DFlashKernel context_backward = DFlashKernel::kSimt;
};

// The plan for `path` on a (group, head_dim) with softmax scale `scale` on a device of compute
// capability major `cc_major`. `mma_applies`: DFlashMmaSupported(group, d) and every tensor
// 16-byte aligned (the caller checks; kMma / kMmaSync without it are its error to report).
// wgmma (sm_90a) only on compute capability 9. The forward's wgmma kernel takes the row max of
// unscaled scores, so it needs scale > 0.
inline constexpr DFlashPlan SelectDFlashPlan(DFlashPath path, bool mma_applies, int64_t group,
                                             int64_t d, float scale, int cc_major) {
  using K = DFlashKernel;
  if (path == DFlashPath::kSimt || !mma_applies) return DFlashPlan{};
  const bool wgmma = path != DFlashPath::kMmaSync && cc_major == 9;
  const bool query = wgmma && DFlashWgmmaQuerySupported(group, d);
  return DFlashPlan{query && scale > 0.0f ? K::kWgmma : K::kMmaSync,
                    query ? K::kWgmma : K::kMmaSync,
                    wgmma && DFlashWgmmaCtxSupported(d) ? K::kWgmma : K::kMmaSync};
}

}  // namespace tandem::kernels::attention_internal
