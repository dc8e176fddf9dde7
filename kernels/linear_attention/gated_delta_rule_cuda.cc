// cuda::GatedDeltaRuleForward: the shared checks, the head-dim bound of the recurrent kernel,
// an NVTX range and the launch (gated_delta_rule.cu). cu_seqlens is shape-checked only.
#include <cmath>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/linear_attention/gated_delta_rule.h"
#include "kernels/linear_attention/gated_delta_rule_kernels.h"
#include "kernels/linear_attention/hybrid_ops.h"

namespace tandem::kernels::cuda {

Status GatedDeltaRuleForward(const GatedDeltaRuleArgs& a, Stream s) {
  constexpr const char* kOp = "GatedDeltaRuleForward";
  int64_t t = 0;
  RETURN_IF_ERROR(internal::CheckGatedDeltaRule(a, &t));
  RETURN_IF_ERROR(internal::CheckCuSeqlensShape(kOp, a.cu_seqlens));
  if (a.key_dim > kGatedDeltaRuleMaxHeadDim || a.value_dim > kGatedDeltaRuleMaxHeadDim)
    return InvalidArgumentError("{}: head dims {} / {} exceed the CUDA kernel's {}", kOp, a.key_dim,
                                a.value_dim, kGatedDeltaRuleMaxHeadDim);
  if (t == 0) return Status::Ok();
  const float scale = a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(a.key_dim));
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchGatedDeltaRuleRecurrent(
      a.out.data(), a.out.stride(0), a.out.dtype() == DType::kF32, a.q.data(), a.q.stride(0),
      a.k.data(), a.k.stride(0), a.v.data(), a.v.stride(0), a.g.data_as<float>(), a.g.stride(0),
      a.beta.data_as<float>(), a.beta.stride(0), a.cu_seqlens.data_as<int32_t>(),
      static_cast<int>(a.cu_seqlens.dim(0) - 1), static_cast<int>(a.key_heads),
      static_cast<int>(a.value_heads), static_cast<int>(a.key_dim), static_cast<int>(a.value_dim),
      a.l2norm_qk, scale, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
