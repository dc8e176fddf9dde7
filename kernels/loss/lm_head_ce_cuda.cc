// Host side of the CUDA fused LM head + cross-entropy: argument checks, workspace carving
// and the per-chunk sequence GEMM -> [row top-k] -> row kernel -> GEMM (kernels in
// lm_head_ce.cu; the top-k in kernels/dflash2/row_topk.cu).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/core/cuda_check.h"
#include "kernels/dflash2/row_topk.h"
#include "kernels/dflash2/row_topk_kernels.h"
#include "kernels/loss/lm_head_ce.h"
#include "kernels/loss/lm_head_ce_kernels.h"

namespace tandem::kernels {
namespace {
int64_t Up256(int64_t b) { return (b + 255) / 256 * 256; }
}  // namespace

namespace cuda {

Status LmHeadCrossEntropy(GemmContext* ctx, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView& workspace,
                          int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform) {
  constexpr const char* kOp = "cuda::LmHeadCrossEntropy";
  int64_t rows, h, v;
  RETURN_IF_ERROR(CheckLmHeadCeArgs(kOp, hidden, weight, targets, row_weights, out, chunk_rows,
                                    &rows, &h, &v));
  if (!hidden.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  RETURN_IF_ERROR(
      dflash2::internal::CheckLogitTransform(kOp, transform.multiplier, transform.softcap));
  const int64_t topk = out.topk_ids.empty() ? 0 : out.topk_ids.dim(1);
  const int64_t need = LmHeadCeWorkspaceBytes(rows, v, chunk_rows);
  RETURN_IF_ERROR(ExpectDType(kOp, "workspace", workspace, DType::kU8));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, hidden, workspace));
  if (workspace.nbytes() < need || reinterpret_cast<uintptr_t>(workspace.data()) % 256 != 0)
    return InvalidArgumentError("{}: workspace {} too small or not 256-byte aligned; need {} "
                                "bytes (LmHeadCeWorkspaceBytes({}, {}, {}))",
                                kOp, workspace.ToString(), need, rows, v, chunk_rows);
  if (rows == 0) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.loss.data(), 0, sizeof(float), s));
    return Status::Ok();
  }
  const int64_t chunk = std::min(rows, chunk_rows);
  const int64_t ld = (v + 7) / 8 * 8;
  auto* base = static_cast<uint8_t*>(workspace.data());
  void* logits = base;
  auto* row_loss = reinterpret_cast<float*>(base + Up256(chunk * ld * 2));
  auto* weight_sum = reinterpret_cast<float*>(base + Up256(chunk * ld * 2) + Up256(rows * 4));
  const auto* tgt = targets.data_as<const int32_t>();
  const auto* w = row_weights.data_as<const float>();

  CUDA_RETURN_IF_ERROR(LaunchCeWeightSum(tgt, w, rows, v, weight_sum, s));
  const bool backward = !out.dhidden.empty();
  GemmOptions logits_opt;
  logits_opt.trans_b = true;  // [n, H] @ [V, H]^T
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    TensorView lg = TensorView(logits, DType::kBF16, {n, ld}, hidden.device()).Narrow(1, 0, v);
    RETURN_IF_ERROR(cuda::Gemm(ctx, hidden.Narrow(0, r0, n), weight, lg, logits_opt, s));
    auto* am = out.argmax.empty() ? nullptr : out.argmax.data_as<int32_t>();
    auto* cor = out.correct.empty() ? nullptr : out.correct.data_as<uint8_t>();
    if (topk > 0)  // before the row kernel, which overwrites the logits with gradients
      CUDA_RETURN_IF_ERROR(dflash2::LaunchRowTopK(
          logits, true, n, ld, v, transform.multiplier, transform.softcap,
          static_cast<int>(topk), out.topk_ids.data_as<int32_t>() + r0 * topk,
          out.topk_values.empty() ? nullptr : out.topk_values.data_as<float>() + r0 * topk, s));
    CUDA_RETURN_IF_ERROR(LaunchCeRows(backward, logits, n, ld, v, tgt, w, weight_sum, r0,
                                      row_loss, am, cor, s, transform.multiplier,
                                      transform.softcap));
    if (backward)
      RETURN_IF_ERROR(cuda::Gemm(ctx, lg, weight, out.dhidden.Narrow(0, r0, n), GemmOptions{}, s));
  }
  CUDA_RETURN_IF_ERROR(LaunchCeLoss(row_loss, rows, weight_sum, out.loss.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace cuda
}  // namespace tandem::kernels
