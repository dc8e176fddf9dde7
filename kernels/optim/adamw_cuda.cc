// Host side of the CUDA GradNorm / AdamW: argument checks, then the launchers in adamw.cu.
#include "kernels/optim/adamw.h"
#include "kernels/optim/adamw_kernels.h"
#include "kernels/core/cuda_check.h"

namespace tandem::kernels::cuda {

Status GradNorm(const TensorView& grads, float max_norm, const TensorView& stats,
                const TensorView& workspace, Stream s) {
  constexpr const char* kOp = "cuda::GradNorm";
  RETURN_IF_ERROR(CheckGradNormArgs(kOp, grads, stats));
  RETURN_IF_ERROR(ExpectDType(kOp, "workspace", workspace, DType::kF32));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, grads, workspace));
  if (!grads.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  if (workspace.numel() < kGradNormWorkspaceSize || !workspace.is_contiguous())
    return InvalidArgumentError("{}: workspace {} needs {} contiguous floats", kOp,
                                workspace.ToString(), kGradNormWorkspaceSize);
  CUDA_RETURN_IF_ERROR(LaunchGradNorm(grads.data_as<const float>(), grads.numel(), max_norm,
                                      workspace.data_as<float>(), stats.data_as<float>(), s));
  return Status::Ok();
}

Status AdamWUpdate(const AdamWConfig& cfg, const TensorView& params, const TensorView& grads,
                   const TensorView& m, const TensorView& v, const TensorView& params_bf16,
                   const TensorView& stats, const TensorView& step, Stream s) {
  constexpr const char* kOp = "cuda::AdamWUpdate";
  RETURN_IF_ERROR(CheckAdamWArgs(kOp, params, grads, m, v, params_bf16, stats, step));
  if (!params.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  if (params.numel() == 0) return Status::Ok();
  CUDA_RETURN_IF_ERROR(LaunchAdamW(cfg, params.data_as<float>(), grads.data_as<const float>(),
                                   m.data_as<float>(), v.data_as<float>(),
                                   params_bf16.empty() ? nullptr : params_bf16.data(),
                                   params.numel(), stats.data_as<const float>(),
                                   step.data_as<const int32_t>(), s));
  return Status::Ok();
}

Status AdamWFinishStep(const TensorView& stats, const TensorView& step, Stream s) {
  constexpr const char* kOp = "cuda::AdamWFinishStep";
  RETURN_IF_ERROR(ExpectDType(kOp, "stats", stats, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(kOp, "stats", stats, Shape{kGradStatsSize}));
  RETURN_IF_ERROR(ExpectDType(kOp, "step", step, DType::kI32));
  RETURN_IF_ERROR(ExpectShape(kOp, "step", step, Shape{1}));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, stats, step));
  CUDA_RETURN_IF_ERROR(LaunchAdamWFinishStep(stats.data_as<const float>(), step.data_as<int32_t>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
