// cuda::PhiloxUniformFill: argument checks, NVTX range, launch (philox.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/random/philox.h"
#include "kernels/random/philox_kernels.h"
#include "kernels/core/stream.h"

namespace tandem::kernels::cuda {

Status PhiloxUniformFill(TensorView out, float lo, float hi, uint64_t seed, uint64_t offset,
                         Stream s) {
  RETURN_IF_ERROR(ExpectDType("PhiloxUniformFill", "out", out, DType::kF32));
  RETURN_IF_ERROR(ExpectContiguous("PhiloxUniformFill", "out", out));
  if (out.numel() == 0) return Status::Ok();
  NvtxRange range("PhiloxUniformFill");
  CUDA_RETURN_IF_ERROR(
      LaunchPhiloxUniformFill(out.data_as<float>(), out.numel(), lo, hi, seed, offset, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
