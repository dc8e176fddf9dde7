// cuda:: entry points of kernels/norm/fused_norm.h: argument checks, NVTX ranges, launches
// (fused_norm.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/norm/fused_norm_internal.h"
#include "kernels/norm/fused_norm_kernels.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {
namespace {

Status CheckHeadDim(const char* op, int64_t d) {
  if (d > kRopeMaxRotaryDim)
    return InvalidArgumentError("{}: head_dim {} exceeds the CUDA kernel's maximum {}", op, d,
                                kRopeMaxRotaryDim);
  return Status::Ok();
}

// The host RoPE table [d / 2] the kernels copy into their parameters (no allocation).
struct InvFreq {
  float v[kRopeMaxRotaryDim / 2];
  InvFreq(int64_t d, double theta) { RopeInvFreq(d, theta, v); }
};

}  // namespace

Status RmsNormRopeForward(TensorView y, TensorView rstd, TensorView x, TensorView w,
                          TensorView pos, float eps, double theta, Stream s) {
  constexpr const char* kOp = "RmsNormRopeForward";
  int64_t rows, d;
  RETURN_IF_ERROR(internal::CheckRmsNormForward(y, rstd, x, w, &rows, &d));
  RETURN_IF_ERROR(internal::CheckRmsNormRope(kOp, y, x, pos, theta));
  RETURN_IF_ERROR(CheckHeadDim(kOp, d));
  if (rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  const InvFreq inv(d, theta);
  CUDA_RETURN_IF_ERROR(LaunchRmsNormRopeForward(
      y.data(), rstd.empty() ? nullptr : rstd.data_as<float>(), x.data(), w.data(),
      pos.data_as<const int32_t>(), inv.v, x.dim(0), x.dim(1), d, eps, s));
  return Status::Ok();
}

Status RopeRmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x,
                           TensorView w, TensorView rstd, TensorView pos, double theta,
                           TensorView workspace, Stream s) {
  constexpr const char* kOp = "RopeRmsNormBackward";
  int64_t rows, d;
  RETURN_IF_ERROR(internal::CheckRmsNormBackward(dx, dw, dy, x, w, rstd, &rows, &d));
  RETURN_IF_ERROR(internal::CheckRmsNormRope(kOp, dx, dy, pos, theta));
  RETURN_IF_ERROR(CheckHeadDim(kOp, d));
  RETURN_IF_ERROR(internal::CheckRmsNormWorkspace(kOp, workspace, x, d));
  if (rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  const InvFreq inv(d, theta);
  CUDA_RETURN_IF_ERROR(LaunchRopeRmsNormBackward(
      dx.data(), dw.data_as<float>(), dy.data(), x.data(), w.data(), rstd.data_as<const float>(),
      pos.data_as<const int32_t>(), inv.v, workspace.data_as<float>(),
      RmsNormBackwardWorkspaceRows(), x.dim(0), x.dim(1), d, s));
  return Status::Ok();
}

Status AddRmsNormForward(TensorView h, TensorView y, TensorView rstd, TensorView a, TensorView b,
                         TensorView w, float eps, Stream s) {
  constexpr const char* kOp = "AddRmsNormForward";
  int64_t rows, hd;
  RETURN_IF_ERROR(internal::CheckAddRmsNormForward(h, y, rstd, a, b, w, &rows, &hd));
  RETURN_IF_ERROR(internal::CheckRmsNormCudaWidth(kOp, hd));
  if (rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchAddRmsNormForward(h.empty() ? nullptr : h.data(), y.data(),
                                               rstd.empty() ? nullptr : rstd.data_as<float>(),
                                               a.data(), b.empty() ? nullptr : b.data(),
                                               w.data(), rows, hd, eps, s));
  return Status::Ok();
}

Status RmsNormBackwardAdd(TensorView dres, TensorView dw, TensorView dy, TensorView x,
                          TensorView w, TensorView rstd, TensorView workspace, Stream s) {
  constexpr const char* kOp = "RmsNormBackwardAdd";
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckRmsNormBackwardAdd(dres, dw, dy, x, w, rstd, &rows, &h));
  RETURN_IF_ERROR(internal::CheckRmsNormCudaWidth(kOp, h));
  RETURN_IF_ERROR(internal::CheckRmsNormWorkspace(kOp, workspace, x, h));
  if (rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchRmsNormBackwardAdd(
      dres.data(), dw.data_as<float>(), dy.data(), dy.dtype() == DType::kF32, x.data(), w.data(),
      rstd.data_as<const float>(), workspace.data_as<float>(), RmsNormBackwardWorkspaceRows(),
      rows, h, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
