// AdamW over parameters carved from one flat fp32 allocation, with the global gradient
// norm, clipping and a non-finite check done on the device, so a training step never
// syncs with the host:
//
//   GradNorm(grads, max_norm, stats)      stats = {norm, clip scale, non-finite flag, sum sq}
//   AdamWUpdate(cfg, params, grads, ...)  uses g * stats[1]; does nothing if stats[2] != 0
//   AdamWFinishStep(stats, step)          step += 1 unless stats[2] != 0
//
// AdamWUpdate may be called several times per step on Narrow()ed sub-ranges of the flat
// buffers (e.g. weight_decay 0 for norm weights), all reading the same stats and step;
// AdamWFinishStep runs once after them. The trainer reads stats[2] (or watches `step`)
// whenever it likes, to learn that a step was skipped, without a per-step sync.
//
// Update (PyTorch AdamW, t = step + 1, g = grad * clip):
//   p -= lr * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps);  p_bf16 = bf16(p)
//
// Thread-safety: asynchronous on the given stream; the caller orders calls on one stream.
#pragma once

#include <cstdint>

#include "kernels/optim/adamw_types.h"
#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

namespace cpu {
// grads f32 [N]; stats f32 [4]; max_norm <= 0 disables clipping; workspace ignored.
Status GradNorm(const TensorView& grads, float max_norm, const TensorView& stats,
                const TensorView& workspace, Stream s);
// params, grads, m, v f32 [N]; params_bf16 bf16 [N] or empty; stats f32 [4]; step i32 [1].
Status AdamWUpdate(const AdamWConfig& cfg, const TensorView& params, const TensorView& grads,
                   const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                   const TensorView& stats, const TensorView& step, Stream s);
Status AdamWFinishStep(const TensorView& stats, const TensorView& step, Stream s);
}  // namespace cpu

namespace cuda {
// workspace f32 [kGradNormWorkspaceSize]. Deterministic: fixed block count and order.
Status GradNorm(const TensorView& grads, float max_norm, const TensorView& stats,
                const TensorView& workspace, Stream s);
Status AdamWUpdate(const AdamWConfig& cfg, const TensorView& params, const TensorView& grads,
                   const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                   const TensorView& stats, const TensorView& step, Stream s);
Status AdamWFinishStep(const TensorView& stats, const TensorView& step, Stream s);
}  // namespace cuda

// Dispatch on the device of the first view.
Status GradNorm(const TensorView& grads, float max_norm, const TensorView& stats,
                const TensorView& workspace, Stream s);
Status AdamWUpdate(const AdamWConfig& cfg, const TensorView& params, const TensorView& grads,
                   const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                   const TensorView& stats, const TensorView& step, Stream s);
Status AdamWFinishStep(const TensorView& stats, const TensorView& step, Stream s);

// Checks shared by both versions.
Status CheckGradNormArgs(const char* op, const TensorView& grads, const TensorView& stats);
Status CheckAdamWArgs(const char* op, const TensorView& params, const TensorView& grads,
                      const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                      const TensorView& stats, const TensorView& step);

}  // namespace tandem::kernels
