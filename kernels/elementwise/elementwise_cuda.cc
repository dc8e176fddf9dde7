// cuda::ResidualAdd, cuda::Cast and cuda::Scale: argument checks, NVTX range, launch (elementwise.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_kernels.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {

Status ResidualAdd(TensorView out, TensorView a, TensorView b, Stream s) {
  RETURN_IF_ERROR(internal::CheckResidualAdd(out, a, b));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("ResidualAdd");
  CUDA_RETURN_IF_ERROR(LaunchResidualAdd(out.data(), a.data(), b.data(), out.numel(),
                                         out.dtype() == DType::kBF16, s));
  return Status::Ok();
}

Status Cast(TensorView out, TensorView in, Stream s) {
  RETURN_IF_ERROR(internal::CheckCast(out, in));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("Cast");
  if (out.dtype() == in.dtype()) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out.data(), in.data(), out.nbytes(), cudaMemcpyDeviceToDevice, s));
    return Status::Ok();
  }
  CUDA_RETURN_IF_ERROR(
      LaunchCast(out.data(), in.data(), out.numel(), out.dtype() == DType::kF32, s));
  return Status::Ok();
}

Status Scale(TensorView out, TensorView in, float scale, Stream s) {
  RETURN_IF_ERROR(internal::CheckScale(out, in, scale));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("Scale");
  CUDA_RETURN_IF_ERROR(LaunchScale(out.data(), in.data(), scale, out.numel(),
                                   out.dtype() == DType::kBF16, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
