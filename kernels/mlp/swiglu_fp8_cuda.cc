// cuda::SwiGluFp8Forward: checks, NVTX range, launch (swiglu_fp8.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fp8.h"
#include "kernels/mlp/swiglu_fp8_kernels.h"

namespace tandem::kernels::cuda {

Status SwiGluFp8Forward(const Fp8GroupActivation& out, TensorView gate, TensorView up, Stream s) {
  constexpr const char* kOp = "cuda::SwiGluFp8Forward";
  RETURN_IF_ERROR(internal::CheckSwiGluFp8(kOp, out, gate, up));
  if (out.data.numel() == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchSwiGluFp8(gate.data(), gate.stride(0), up.data(), up.stride(0),
                                       gate.dim(0), out.data.dim(0), gate.dim(1),
                                       out.data.data_as<uint8_t>(), out.scale.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
