// cuda::MoeRouterForward / MoePermute / MoeCombine: argument checks, NVTX ranges, launches
// (moe.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/moe/combine.h"
#include "kernels/moe/moe_kernels.h"
#include "kernels/moe/routing.h"

namespace tandem::kernels::cuda {

Status MoeRouterForward(TensorView topk_ids, TensorView topk_weights, TensorView logits,
                        bool normalize, Stream s) {
  RETURN_IF_ERROR(internal::CheckMoeRouter(topk_ids, topk_weights, logits));
  if (logits.dim(0) == 0) return Status::Ok();
  NvtxRange range("MoeRouterForward");
  CUDA_RETURN_IF_ERROR(LaunchMoeRouter(topk_ids.data_as<int32_t>(), topk_weights.data_as<float>(),
                                       logits.data(), logits.dtype() == DType::kF32,
                                       logits.dim(0), logits.dim(1), topk_ids.dim(1), normalize,
                                       s));
  return Status::Ok();
}

Status MoePermute(TensorView expert_offsets, TensorView perm_token, TensorView assign_row,
                  TensorView topk_ids, Stream s) {
  RETURN_IF_ERROR(internal::CheckMoePermute(expert_offsets, perm_token, assign_row, topk_ids));
  NvtxRange range("MoePermute");
  CUDA_RETURN_IF_ERROR(LaunchMoePermute(
      expert_offsets.data_as<int32_t>(), perm_token.data_as<int32_t>(),
      assign_row.data_as<int32_t>(), topk_ids.data_as<const int32_t>(), topk_ids.numel(),
      expert_offsets.dim(0) - 1, topk_ids.dim(1), s));
  return Status::Ok();
}

Status MoePadLayout(TensorView padded_token, TensorView padded_row, TensorView expert_offsets,
                    TensorView perm_token, TensorView assign_row, TensorView topk_ids,
                    int64_t cap, Stream s) {
  RETURN_IF_ERROR(internal::CheckMoePadLayout(padded_token, padded_row, expert_offsets,
                                              perm_token, assign_row, topk_ids, cap));
  NvtxRange range("MoePadLayout");
  CUDA_RETURN_IF_ERROR(LaunchMoePadLayout(
      padded_token.data_as<int32_t>(), padded_row.data_as<int32_t>(),
      expert_offsets.data_as<const int32_t>(), perm_token.data_as<const int32_t>(),
      assign_row.data_as<const int32_t>(), topk_ids.data_as<const int32_t>(), topk_ids.numel(),
      expert_offsets.dim(0) - 1, cap, s));
  return Status::Ok();
}

Status MoeCombine(const MoeCombineArgs& a, Stream s) {
  RETURN_IF_ERROR(internal::CheckMoeCombine(a));
  NvtxRange range("MoeCombine");
  CUDA_RETURN_IF_ERROR(LaunchMoeCombine(
      a.out.data(), a.residual.data(), a.y.data(), a.assign_row.data_as<const int32_t>(),
      a.weights.data_as<const float>(), a.shared.empty() ? nullptr : a.shared.data(),
      a.shared.empty() ? nullptr : a.shared_gate.data_as<const float>(),
      a.ids.empty() ? nullptr : a.row_scale.data_as<const float>(),
      a.ids.empty() ? nullptr : a.channel_scale.data_as<const float>(),
      a.ids.empty() ? nullptr : a.ids.data_as<const int32_t>(), a.out.dim(0), a.out.dim(1),
      a.weights.dim(1), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
