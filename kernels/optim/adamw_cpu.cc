// CPU reference of GradNorm / AdamW (same formulas and fp32 arithmetic as the CUDA kernels;
// the sum of squares is in float64), the shared argument checks and the device dispatch.
#include <algorithm>
#include <cmath>

#include "kernels/optim/adamw.h"

namespace tandem::kernels {

Status CheckGradNormArgs(const char* op, const TensorView& grads, const TensorView& stats) {
  RETURN_IF_ERROR(ExpectDType(op, "grads", grads, DType::kF32));
  RETURN_IF_ERROR(ExpectContiguous(op, "grads", grads));
  RETURN_IF_ERROR(ExpectDType(op, "stats", stats, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(op, "stats", stats, Shape{kGradStatsSize}));
  return ExpectSameDevice(op, grads, stats);
}

Status CheckAdamWArgs(const char* op, const TensorView& params, const TensorView& grads,
                      const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                      const TensorView& stats, const TensorView& step) {
  struct Arg {
    const char* name;
    const TensorView* t;
    DType dtype;
  };
  for (const Arg& a : {Arg{"params", &params, DType::kF32}, Arg{"grads", &grads, DType::kF32},
                       Arg{"m", &m, DType::kF32}, Arg{"v", &v, DType::kF32}}) {
    RETURN_IF_ERROR(ExpectDType(op, a.name, *a.t, a.dtype));
    RETURN_IF_ERROR(ExpectContiguous(op, a.name, *a.t));
    if (a.t->numel() != params.numel())
      return InvalidArgumentError("{}: {} {} has {} elements, params has {}", op, a.name,
                                  a.t->ToString(), a.t->numel(), params.numel());
    RETURN_IF_ERROR(ExpectSameDevice(op, params, *a.t));
  }
  if (!params_bf16.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "params_bf16", params_bf16, DType::kBF16));
    RETURN_IF_ERROR(ExpectContiguous(op, "params_bf16", params_bf16));
    if (params_bf16.numel() != params.numel())
      return InvalidArgumentError("{}: params_bf16 has {} elements, params has {}", op,
                                  params_bf16.numel(), params.numel());
    RETURN_IF_ERROR(ExpectSameDevice(op, params, params_bf16));
  }
  RETURN_IF_ERROR(ExpectDType(op, "stats", stats, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(op, "stats", stats, Shape{kGradStatsSize}));
  RETURN_IF_ERROR(ExpectDType(op, "step", step, DType::kI32));
  RETURN_IF_ERROR(ExpectShape(op, "step", step, Shape{1}));
  RETURN_IF_ERROR(ExpectSameDevice(op, params, stats));
  return ExpectSameDevice(op, params, step);
}

Status GradNorm(const TensorView& grads, float max_norm, const TensorView& stats,
                const TensorView& workspace, Stream s) {
  if (grads.device().is_cpu()) return cpu::GradNorm(grads, max_norm, stats, workspace, s);
  return cuda::GradNorm(grads, max_norm, stats, workspace, s);
}

Status AdamWUpdate(const AdamWConfig& cfg, const TensorView& params, const TensorView& grads,
                   const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                   const TensorView& stats, const TensorView& step, Stream s) {
  if (params.device().is_cpu())
    return cpu::AdamWUpdate(cfg, params, grads, m, v, params_bf16, stats, step, s);
  return cuda::AdamWUpdate(cfg, params, grads, m, v, params_bf16, stats, step, s);
}

Status AdamWFinishStep(const TensorView& stats, const TensorView& step, Stream s) {
  if (stats.device().is_cpu()) return cpu::AdamWFinishStep(stats, step, s);
  return cuda::AdamWFinishStep(stats, step, s);
}

namespace cpu {

Status GradNorm(const TensorView& grads, float max_norm, const TensorView& stats,
                const TensorView&, Stream) {
  RETURN_IF_ERROR(CheckGradNormArgs("cpu::GradNorm", grads, stats));
  const float* g = grads.data_as<const float>();
  double sumsq = 0;
  bool nonfinite = false;
  for (int64_t i = 0; i < grads.numel(); ++i) {
    nonfinite |= !std::isfinite(g[i]);
    sumsq += static_cast<double>(g[i]) * g[i];
  }
  float* st = stats.data_as<float>();
  const float sq = static_cast<float>(sumsq);
  nonfinite |= !std::isfinite(sq);
  const float norm = std::sqrt(sq);
  st[kGradStatsNorm] = norm;
  st[kGradStatsClip] = max_norm > 0 && !nonfinite ? std::min(1.f, max_norm / (norm + 1e-6f)) : 1.f;
  st[kGradStatsNonFinite] = nonfinite ? 1.f : 0.f;
  st[kGradStatsSumSq] = sq;
  return Status::Ok();
}

Status AdamWUpdate(const AdamWConfig& cfg, const TensorView& params, const TensorView& grads,
                   const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                   const TensorView& stats, const TensorView& step, Stream) {
  RETURN_IF_ERROR(
      CheckAdamWArgs("cpu::AdamWUpdate", params, grads, m, v, params_bf16, stats, step));
  const float* st = stats.data_as<const float>();
  if (st[kGradStatsNonFinite] != 0.f) return Status::Ok();
  const float clip = st[kGradStatsClip];
  const int t = step.data_as<const int32_t>()[0] + 1;
  const float step_size = cfg.lr / (1.f - std::pow(cfg.beta1, static_cast<float>(t)));
  const float inv_sqrt_bc2 = 1.f / std::sqrt(1.f - std::pow(cfg.beta2, static_cast<float>(t)));
  const float decay = 1.f - cfg.lr * cfg.weight_decay;
  float* p = params.data_as<float>();
  const float* g = grads.data_as<const float>();
  float* mm = m.data_as<float>();
  float* vv = v.data_as<float>();
  for (int64_t i = 0; i < params.numel(); ++i) {
    const float gi = g[i] * clip;
    mm[i] = cfg.beta1 * mm[i] + (1.f - cfg.beta1) * gi;
    vv[i] = cfg.beta2 * vv[i] + (1.f - cfg.beta2) * gi * gi;
    p[i] = p[i] * decay - step_size * mm[i] / (std::sqrt(vv[i]) * inv_sqrt_bc2 + cfg.eps);
    if (!params_bf16.empty()) params_bf16.data_as<bf16>()[i] = bf16(p[i]);
  }
  return Status::Ok();
}

Status AdamWFinishStep(const TensorView& stats, const TensorView& step, Stream) {
  RETURN_IF_ERROR(ExpectDType("cpu::AdamWFinishStep", "step", step, DType::kI32));
  RETURN_IF_ERROR(ExpectShape("cpu::AdamWFinishStep", "stats", stats, Shape{kGradStatsSize}));
  if (stats.data_as<const float>()[kGradStatsNonFinite] == 0.f) step.data_as<int32_t>()[0] += 1;
  return Status::Ok();
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
namespace {
Status NoCuda(const char* op) {
  return UnavailableError("{}: views are on a CUDA device but tandem was built without CUDA",
                          op);
}
}  // namespace
Status GradNorm(const TensorView&, float, const TensorView&, const TensorView&, Stream) {
  return NoCuda("GradNorm");
}
Status AdamWUpdate(const AdamWConfig&, const TensorView&, const TensorView&, const TensorView&,
                   const TensorView&, const TensorView&, const TensorView&, const TensorView&,
                   Stream) {
  return NoCuda("AdamWUpdate");
}
Status AdamWFinishStep(const TensorView&, const TensorView&, Stream) {
  return NoCuda("AdamWFinishStep");
}
}  // namespace cuda
#endif

}  // namespace tandem::kernels
