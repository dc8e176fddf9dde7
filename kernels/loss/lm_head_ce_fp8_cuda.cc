// Host side of the CUDA FP8 LM head + cross-entropy (lm_head_ce_fp8.h): argument checks,
// workspace carving, and per chunk: quantize hidden rows -> FP8 GEMM (logits) -> [the bf16
// path's row top-k] -> its row kernel (loss, argmax, g in place, the logit transform in
// both) -> quantize g -> FP8 GEMM (d hidden).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/core/cuda_check.h"
#include "kernels/dflash2/row_topk_kernels.h"
#include "kernels/loss/lm_head_ce_fp8.h"
#include "kernels/loss/lm_head_ce_kernels.h"

namespace tandem::kernels::cuda {
namespace {

int64_t Up256(int64_t b) { return (b + 255) / 256 * 256; }

// A view of `shape` at the workspace cursor, which moves past it (256-byte aligned).
TensorView Take(char** cursor, DType dtype, Shape shape, Device device) {
  TensorView v(*cursor, dtype, shape, device);
  *cursor += Up256(v.nbytes());
  return v;
}

}  // namespace

Status LmHeadCrossEntropyFp8(GemmContext* ctx, const TensorView& hidden, const Fp8LmHead& head,
                             const TensorView& targets, const TensorView& row_weights,
                             const LmHeadCeOutputs& out, const TensorView& workspace,
                             int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform) {
  constexpr const char* kOp = "cuda::LmHeadCrossEntropyFp8";
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckLmHeadCeFp8Args(kOp, hidden, head, targets, row_weights, out,
                                                 chunk_rows, transform, &rows, &h));
  const int64_t topk = out.topk_ids.empty() ? 0 : out.topk_ids.dim(1);
  const int64_t v = head.vocab();
  if (!hidden.device().is_cuda()) return InvalidArgumentError("{}: views must be on CUDA", kOp);
  if (h % 16 != 0 || v % 16 != 0)
    return InvalidArgumentError("{}: the FP8 LM head needs hidden size and vocab multiples of "
                                "16 (cuBLASLt FP8), got H={} V={}", kOp, h, v);
  const int64_t need = LmHeadCeFp8WorkspaceBytes(rows, v, h, chunk_rows);
  RETURN_IF_ERROR(ExpectDType(kOp, "workspace", workspace, DType::kU8));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, hidden, workspace));
  if (workspace.nbytes() < need || reinterpret_cast<uintptr_t>(workspace.data()) % 256 != 0)
    return InvalidArgumentError("{}: workspace {} too small or not 256-byte aligned; need {} "
                                "bytes (LmHeadCeFp8WorkspaceBytes({}, {}, {}, {}))",
                                kOp, workspace.ToString(), need, rows, v, h, chunk_rows);
  if (rows == 0) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.loss.data(), 0, sizeof(float), s));
    return Status::Ok();
  }
  const Device dev = hidden.device();
  const int64_t chunk = std::min(rows, chunk_rows), cp = Fp8PaddedRows(chunk);
  const int64_t ld = (v + 7) / 8 * 8;
  char* cursor = static_cast<char*>(workspace.data());
  const TensorView logits = Take(&cursor, DType::kBF16, {cp, ld}, dev);
  auto* row_loss = Take(&cursor, DType::kF32, {rows}, dev).data_as<float>();
  auto* weight_sum = Take(&cursor, DType::kF32, {1}, dev).data_as<float>();
  const TensorView x8 = Take(&cursor, DType::kF8E4M3, {cp * h}, dev);
  const TensorView x8_scale = Take(&cursor, DType::kF32, {Fp8ActScaleElems(cp, h)}, dev);
  const TensorView g8 = Take(&cursor, DType::kF8E4M3, {cp * v}, dev);
  const TensorView g8_scale = Take(&cursor, DType::kF32, {Fp8ActScaleElems(cp, v)}, dev);
  const TensorView ragged = Take(&cursor, DType::kBF16, {cp, h}, dev);
  const auto* tgt = targets.data_as<const int32_t>();
  const auto* w = row_weights.data_as<const float>();

  CUDA_RETURN_IF_ERROR(LaunchCeWeightSum(tgt, w, rows, v, weight_sum, s));
  const bool backward = !out.dhidden.empty();
  GemmOptions linear;
  linear.trans_b = true;  // y = a W^T
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0), np = Fp8PaddedRows(n);
    const Fp8GroupActivation xa{x8.Narrow(0, 0, np * h).Reshape({np, h}), x8_scale};
    RETURN_IF_ERROR(cuda::QuantizeFp8Activation(hidden.Narrow(0, r0, n), xa, s));
    const TensorView lg = logits.Narrow(0, 0, np).Narrow(1, 0, v);  // [np, V], row stride ld
    RETURN_IF_ERROR(cuda::Fp8Gemm(ctx, xa, head.w, lg, linear, s));
    auto* am = out.argmax.empty() ? nullptr : out.argmax.data_as<int32_t>();
    auto* cor = out.correct.empty() ? nullptr : out.correct.data_as<uint8_t>();
    if (topk > 0)  // before the row kernel, which overwrites the logits with gradients
      CUDA_RETURN_IF_ERROR(dflash2::LaunchRowTopK(
          logits.data(), true, n, ld, v, transform.multiplier, transform.softcap,
          static_cast<int>(topk), out.topk_ids.data_as<int32_t>() + r0 * topk,
          out.topk_values.empty() ? nullptr : out.topk_values.data_as<float>() + r0 * topk, s));
    CUDA_RETURN_IF_ERROR(LaunchCeRows(backward, logits.data(), n, ld, v, tgt, w, weight_sum, r0,
                                      row_loss, am, cor, s, transform.multiplier,
                                      transform.softcap));
    if (!backward) continue;
    const Fp8GroupActivation ga{g8.Narrow(0, 0, np * v).Reshape({np, v}), g8_scale};
    RETURN_IF_ERROR(cuda::QuantizeFp8Activation(lg.Narrow(0, 0, n), ga, s));
    // The GEMM writes np rows: straight into d hidden when n fills them, else via `ragged`.
    const TensorView dh = out.dhidden.Narrow(0, r0, n);
    RETURN_IF_ERROR(cuda::Fp8Gemm(ctx, ga, head.wt, np == n ? dh : ragged.Narrow(0, 0, np), linear, s));
    if (np != n) RETURN_IF_ERROR(Copy(dh, ragged.Narrow(0, 0, n), s));
  }
  CUDA_RETURN_IF_ERROR(LaunchCeLoss(row_loss, rows, weight_sum, out.loss.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace tandem::kernels::cuda
