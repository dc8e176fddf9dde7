// cuda::GatedDeltaRuleChunkedForward: the shared checks, what the chunked kernel needs (head
// dims 128, 16-byte aligned rows, the workspace), an NVTX range and the launch
// (gated_delta_rule_chunked.cu). cu_seqlens is shape-checked only.
#include <cmath>
#include <cstdint>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/linear_attention/gated_delta_rule_chunked.h"
#include "kernels/linear_attention/gated_delta_rule_chunked_kernels.h"
#include "kernels/linear_attention/hybrid_ops.h"

namespace tandem::kernels::cuda {

Status GatedDeltaRuleChunkedForward(const GatedDeltaRuleArgs& a, TensorView workspace,
                                    Stream s) {
  constexpr const char* kOp = "GatedDeltaRuleChunkedForward";
  int64_t t = 0;
  RETURN_IF_ERROR(internal::CheckGatedDeltaRule(a, &t));
  RETURN_IF_ERROR(internal::CheckCuSeqlensShape(kOp, a.cu_seqlens));
  if (!GatedDeltaRuleChunkedSupports(a.key_dim, a.value_dim))
    return InvalidArgumentError("{}: head dims {} / {}: the chunked kernel takes {} / {} only "
                                "(use GatedDeltaRuleForward, the recurrent kernel)", kOp,
                                a.key_dim, a.value_dim, kGatedDeltaRuleChunkedDim,
                                kGatedDeltaRuleChunkedDim);
  for (const auto& [name, view] : {std::pair{"q", &a.q}, {"k", &a.k}, {"v", &a.v}}) {
    if (reinterpret_cast<uintptr_t>(view->data()) % 16 != 0 || view->stride(0) % 8 != 0)
      return InvalidArgumentError("{}: {} rows must be 16-byte aligned (row stride {} elements, "
                                  "a multiple of 8)", kOp, name, view->stride(0));
  }
  const int64_t need = GatedDeltaRuleChunkedWorkspaceBytes(t, a.key_heads, a.value_heads, a.key_dim,
                                                           a.value_dim);
  if (workspace.nbytes() < need || workspace.device() != a.q.device())
    return InvalidArgumentError("{}: the workspace has {} bytes on {}; {} tokens need {} on the "
                                "inputs' device", kOp, workspace.nbytes(),
                                workspace.ToString(), t, need);
  if (t == 0) return Status::Ok();
  const float scale = a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(a.key_dim));
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchGatedDeltaRuleChunked(
      a.out.data(), a.out.stride(0), a.out.dtype() == DType::kF32, a.q.data(), a.q.stride(0),
      a.k.data(), a.k.stride(0), a.v.data(), a.v.stride(0), a.g.data_as<float>(), a.g.stride(0),
      a.beta.data_as<float>(), a.beta.stride(0), a.cu_seqlens.data_as<int32_t>(),
      static_cast<int>(a.cu_seqlens.dim(0) - 1), t, static_cast<int>(a.key_heads),
      static_cast<int>(a.value_heads), a.l2norm_qk, scale, workspace.data(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
