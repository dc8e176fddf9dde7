// cuda::RmsNormFp8Forward: checks, NVTX range, launch (rmsnorm_fp8.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/norm/rmsnorm_fp8.h"
#include "kernels/norm/rmsnorm_fp8_kernels.h"

namespace tandem::kernels::cuda {

Status RmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView w, float eps,
                         Stream s, float weight_offset) {
  constexpr const char* kOp = "cuda::RmsNormFp8Forward";
  RETURN_IF_ERROR(internal::CheckRmsNormFp8(kOp, out, x, w));
  if (out.data.numel() == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchRmsNormFp8(x.data(), x.stride(0), w.data(), weight_offset, x.dim(0),
                                        out.data.dim(0), x.dim(1), eps,
                                        out.data.data_as<uint8_t>(), out.scale.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
