// AdamW hyper-parameters and the layout of the grad-stats vector (see adamw.h). Kept free
// of Status/fmt so CUDA sources can include it. Thread-safety: value types and constants.
#pragma once

#include <cstdint>

namespace tandem::kernels {

struct AdamWConfig {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
};

// Layout of the f32 [kGradStatsSize] stats view written by GradNorm.
inline constexpr int64_t kGradStatsSize = 4;
inline constexpr int kGradStatsNorm = 0;       // global L2 norm of the grads
inline constexpr int kGradStatsClip = 1;       // min(1, max_norm / (norm + 1e-6)); 1 if no clip
inline constexpr int kGradStatsNonFinite = 2;  // 1 if any grad is NaN/Inf (or sum sq overflows)
inline constexpr int kGradStatsSumSq = 3;      // sum of squares

// f32 workspace entries GradNorm's CUDA version needs (per-block partial sums).
inline constexpr int64_t kGradNormBlocks = 1024;
inline constexpr int64_t kGradNormWorkspaceSize = 2 * kGradNormBlocks;

}  // namespace tandem::kernels
