// cuda::RmsNormForward/Backward: argument checks, NVTX range, launch (rmsnorm.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_kernels.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {

using internal::CheckRmsNormCudaWidth;

Status RmsNormForward(TensorView y, TensorView rstd, TensorView x, TensorView w, float eps,
                      Stream s) {
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckRmsNormForward(y, rstd, x, w, &rows, &h));
  RETURN_IF_ERROR(CheckRmsNormCudaWidth("RmsNormForward", h));
  if (rows == 0) return Status::Ok();
  NvtxRange range("RmsNormForward");
  CUDA_RETURN_IF_ERROR(LaunchRmsNormForward(y.data(),
                                            rstd.empty() ? nullptr : rstd.data_as<float>(),
                                            x.data(), w.data(), rows, h, eps, s));
  return Status::Ok();
}

Status RmsNormBackward(TensorView dx, TensorView dw, TensorView dy, TensorView x, TensorView w,
                       TensorView rstd, TensorView workspace, Stream s) {
  constexpr const char* kOp = "RmsNormBackward";
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckRmsNormBackward(dx, dw, dy, x, w, rstd, &rows, &h));
  RETURN_IF_ERROR(CheckRmsNormCudaWidth(kOp, h));
  RETURN_IF_ERROR(internal::CheckRmsNormWorkspace(kOp, workspace, x, h));
  if (rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchRmsNormBackward(
      dx.data(), dw.data_as<float>(), dy.data(), x.data(), w.data(), rstd.data_as<const float>(),
      workspace.data_as<float>(), RmsNormBackwardWorkspaceRows(), rows, h, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
