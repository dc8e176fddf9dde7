// cuda:: versions of decode_step.h: the shared checks, the head-dim bound of the recurrent
// kernel, an NVTX range, the launch (the conv step in decode_step.cu, the delta rule step in
// gated_delta_rule.cu) and its error.
#include <cmath>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/linear_attention/decode_step.h"
#include "kernels/linear_attention/decode_step_kernels.h"
#include "kernels/linear_attention/gated_delta_rule_kernels.h"

namespace tandem::kernels::cuda {

Status CausalConv1dSiluStep(TensorView out, TensorView history, TensorView x, TensorView state,
                            TensorView w, Stream s) {
  int64_t n = 0, k = 0;
  RETURN_IF_ERROR(internal::CheckConvStep(out, history, x, state, w, &n, &k));
  NvtxRange range("CausalConv1dSiluStep");
  CUDA_RETURN_IF_ERROR(LaunchCausalConv1dSiluStep(out.data(), out.stride(0), history.data(),
                                                  history.dim(0), x.data(), x.stride(0),
                                                  state.data(), w.data(), n, x.dim(1), k, s));
  return Status::Ok();
}

Status GatedDeltaRuleStep(const GatedDeltaRuleStepArgs& args, Stream s) {
  constexpr const char* kOp = "GatedDeltaRuleStep";
  int64_t n = 0;
  RETURN_IF_ERROR(internal::CheckGatedDeltaRuleStep(args, &n));
  const GatedDeltaRuleArgs& a = args.rule;
  if (a.key_dim > kGatedDeltaRuleMaxHeadDim || a.value_dim > kGatedDeltaRuleMaxHeadDim)
    return InvalidArgumentError("{}: head dims {} / {} exceed the CUDA kernel's {}", kOp, a.key_dim,
                                a.value_dim, kGatedDeltaRuleMaxHeadDim);
  const float scale = a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(a.key_dim));
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchGatedDeltaRuleStep(
      a.out.empty() ? nullptr : a.out.data(), a.out.empty() ? 0 : a.out.stride(0),
      a.out.dtype() == DType::kF32, a.q.data(), a.q.stride(0), a.k.data(), a.k.stride(0),
      a.v.data(), a.v.stride(0), a.g.data_as<float>(), a.g.stride(0), a.beta.data_as<float>(),
      a.beta.stride(0), args.state_in.data_as<float>(), args.state_out.data_as<float>(), n,
      static_cast<int>(a.key_heads), static_cast<int>(a.value_heads), static_cast<int>(a.key_dim),
      static_cast<int>(a.value_dim), a.l2norm_qk, scale, s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
