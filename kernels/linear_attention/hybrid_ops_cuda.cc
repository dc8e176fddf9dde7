// cuda:: versions of hybrid_ops.h: the shared argument checks, an NVTX range, the launch
// (hybrid_ops.cu) and its error. cu_seqlens is only shape-checked here: reading its values
// would synchronise the host.
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/linear_attention/hybrid_ops_kernels.h"

namespace tandem::kernels::cuda {

Status CausalConv1dSiluForward(TensorView out, TensorView x, TensorView w, TensorView cu_seqlens,
                               Stream s) {
  int64_t k = 0;
  RETURN_IF_ERROR(internal::CheckConv(out, x, w, cu_seqlens, &k));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("CausalConv1dSiluForward");
  CUDA_RETURN_IF_ERROR(LaunchCausalConv1dSilu(
      out.data(), out.stride(0), x.data(), x.stride(0), w.data(), cu_seqlens.data_as<int32_t>(),
      static_cast<int>(cu_seqlens.dim(0) - 1), x.dim(0), x.dim(1), k, s));
  return Status::Ok();
}

Status GatedDeltaGates(TensorView g, TensorView beta, TensorView a, TensorView b, TensorView a_log,
                       TensorView dt_bias, Stream s) {
  RETURN_IF_ERROR(internal::CheckGates(g, beta, a, b, a_log, dt_bias));
  if (a.dim(0) == 0) return Status::Ok();
  NvtxRange range("GatedDeltaGates");
  CUDA_RETURN_IF_ERROR(LaunchGatedDeltaGates(
      g.data_as<float>(), g.stride(0), beta.data_as<float>(), beta.stride(0), a.data(), a.stride(0),
      b.data(), b.stride(0), a_log.data(), dt_bias.data(), a.dim(0), a.dim(1), s));
  return Status::Ok();
}

Status GatedRmsNormForward(TensorView out, TensorView x, TensorView z, TensorView w, float eps,
                           Stream s) {
  RETURN_IF_ERROR(internal::CheckGatedNorm(out, x, z, w));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("GatedRmsNormForward");
  CUDA_RETURN_IF_ERROR(LaunchGatedRmsNorm(out.data(), out.stride(0), x.data(), x.stride(0),
                                          z.data(), z.stride(0), w.data(), x.dim(0), x.dim(1),
                                          w.dim(0), eps, s));
  return Status::Ok();
}

Status ZeroCentredRmsNormForward(TensorView out, TensorView x, TensorView w, float eps, Stream s) {
  RETURN_IF_ERROR(internal::CheckZeroCentredNorm(out, x, w));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("ZeroCentredRmsNormForward");
  CUDA_RETURN_IF_ERROR(LaunchZeroCentredRmsNorm(out.data(), out.stride(0), x.data(), x.stride(0),
                                                w.data(), x.dim(0), x.dim(1), eps, s));
  return Status::Ok();
}

Status SigmoidGateForward(TensorView out, TensorView x, TensorView gate, Stream s) {
  RETURN_IF_ERROR(internal::CheckSigmoidGate(out, x, gate));
  if (x.dim(0) == 0) return Status::Ok();
  NvtxRange range("SigmoidGateForward");
  CUDA_RETURN_IF_ERROR(LaunchSigmoidGate(out.data(), out.stride(0), x.data(), x.stride(0),
                                         gate.data(), gate.stride(0), x.dim(0), x.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
