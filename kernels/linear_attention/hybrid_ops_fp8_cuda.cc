// cuda:: versions of hybrid_ops_fp8.h: the shared checks, an NVTX range, the launch
// (hybrid_ops_fp8.cu) and its error.
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/linear_attention/hybrid_ops_fp8.h"
#include "kernels/linear_attention/hybrid_ops_fp8_kernels.h"

namespace tandem::kernels::cuda {

Status GatedRmsNormFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView z,
                              TensorView w, float eps, Stream s) {
  RETURN_IF_ERROR(internal::CheckGatedNormFp8(out, x, z, w));
  const int64_t t = x.dim(0), cols = x.dim(1), d = w.dim(0);
  if (d != 128 && cols / d > kGatedNormFp8MaxHeads)
    return InvalidArgumentError(
        "GatedRmsNormFp8Forward: CUDA takes at most {} heads per row unless d = 128, got {}",
        kGatedNormFp8MaxHeads, cols / d);
  if (t == 0) return Status::Ok();
  NvtxRange range("GatedRmsNormFp8Forward");
  CUDA_RETURN_IF_ERROR(LaunchGatedRmsNormFp8(
      x.data(), x.stride(0), z.data(), z.stride(0), w.data(), t, cols, d, eps, out.data.dim(0),
      out.data.data_as<uint8_t>(), out.scale.data_as<float>(), s));
  return Status::Ok();
}

Status SigmoidGateFp8Forward(const Fp8GroupActivation& out, TensorView x, TensorView gate,
                             Stream s) {
  int64_t heads = 0;
  RETURN_IF_ERROR(internal::CheckSigmoidGateFp8(out, x, gate, &heads));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("SigmoidGateFp8Forward");
  CUDA_RETURN_IF_ERROR(LaunchSigmoidGateFp8(x.data(), x.stride(0), gate.data(), gate.stride(0),
                                            x.dim(0) / heads, heads, x.dim(1), out.data.dim(0),
                                            out.data.data_as<uint8_t>(),
                                            out.scale.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
