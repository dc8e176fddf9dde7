// CPU reference for the fused LM head + cross-entropy: for each row, fp32 logits against
// every vocab row of W, logsumexp and softmax in float64, then dHidden accumulated in fp32.
// Also holds the shared argument checks, the workspace size and the device dispatch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/loss/lm_head_ce.h"

namespace tandem::kernels {

int64_t LmHeadCeWorkspaceBytes(int64_t rows, int64_t vocab, int64_t chunk_rows) {
  int64_t chunk = std::min(rows, chunk_rows);
  int64_t ld = (vocab + 7) / 8 * 8;
  auto up256 = [](int64_t b) { return (b + 255) / 256 * 256; };
  return up256(chunk * ld * 2) + up256(rows * 4) + 256;
}

Status CheckLmHeadCeArgs(const char* op, const TensorView& hidden, const TensorView& weight,
                         const TensorView& targets, const TensorView& row_weights,
                         const LmHeadCeOutputs& out, int64_t chunk_rows, int64_t* rows,
                         int64_t* hidden_dim, int64_t* vocab) {
  RETURN_IF_ERROR(ExpectDType(op, "weight", weight, DType::kBF16));
  if (hidden.ndim() != 2 || weight.ndim() != 2)
    return InvalidArgumentError("{}: hidden {} and weight {} must be 2-d", op, hidden.ToString(),
                                weight.ToString());
  *vocab = weight.dim(0);
  RETURN_IF_ERROR(ExpectShape(op, "weight", weight, Shape{*vocab, hidden.dim(1)}));
  RETURN_IF_ERROR(ExpectContiguous(op, "weight", weight));
  return internal::CheckLmHeadCeRows(op, hidden, *vocab, targets, row_weights, out, chunk_rows,
                                     rows, hidden_dim);
}

Status internal::CheckLmHeadCeRows(const char* op, const TensorView& hidden, int64_t vocab,
                                   const TensorView& targets, const TensorView& row_weights,
                                   const LmHeadCeOutputs& out, int64_t chunk_rows, int64_t* rows,
                                   int64_t* hidden_dim) {
  RETURN_IF_ERROR(ExpectDType(op, "hidden", hidden, DType::kBF16));
  if (hidden.ndim() != 2)
    return InvalidArgumentError("{}: hidden {} must be 2-d", op, hidden.ToString());
  *rows = hidden.dim(0);
  *hidden_dim = hidden.dim(1);
  const int64_t r = *rows;
  RETURN_IF_ERROR(ExpectContiguous(op, "hidden", hidden));
  RETURN_IF_ERROR(ExpectDType(op, "targets", targets, DType::kI32));
  RETURN_IF_ERROR(ExpectShape(op, "targets", targets, Shape{r}));
  RETURN_IF_ERROR(ExpectDType(op, "row_weights", row_weights, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(op, "row_weights", row_weights, Shape{r}));
  RETURN_IF_ERROR(ExpectDType(op, "loss", out.loss, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(op, "loss", out.loss, Shape{1}));
  for (const TensorView* t : {&targets, &row_weights, &out.loss})
    RETURN_IF_ERROR(ExpectSameDevice(op, hidden, *t));
  if (!out.argmax.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "argmax", out.argmax, DType::kI32));
    RETURN_IF_ERROR(ExpectShape(op, "argmax", out.argmax, Shape{r}));
    RETURN_IF_ERROR(ExpectSameDevice(op, hidden, out.argmax));
  }
  if (!out.correct.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "correct", out.correct, DType::kU8));
    RETURN_IF_ERROR(ExpectShape(op, "correct", out.correct, Shape{r}));
    RETURN_IF_ERROR(ExpectSameDevice(op, hidden, out.correct));
  }
  if (!out.dhidden.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "dhidden", out.dhidden, DType::kBF16));
    RETURN_IF_ERROR(ExpectShape(op, "dhidden", out.dhidden, hidden.shape()));
    RETURN_IF_ERROR(ExpectContiguous(op, "dhidden", out.dhidden));
    RETURN_IF_ERROR(ExpectSameDevice(op, hidden, out.dhidden));
  }
  if (chunk_rows <= 0)
    return InvalidArgumentError("{}: chunk_rows must be positive, got {}", op, chunk_rows);
  if (vocab <= 0) return InvalidArgumentError("{}: empty vocabulary", op);
  return Status::Ok();
}

Status LmHeadCrossEntropy(GemmContext* ctx, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView& workspace,
                          int64_t chunk_rows, Stream s) {
  if (hidden.device().is_cpu())
    return cpu::LmHeadCrossEntropy(ctx, hidden, weight, targets, row_weights, out, workspace,
                                   chunk_rows, s);
  return cuda::LmHeadCrossEntropy(ctx, hidden, weight, targets, row_weights, out, workspace,
                                  chunk_rows, s);
}

namespace cpu {

Status LmHeadCrossEntropy(GemmContext*, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView&, int64_t chunk_rows,
                          Stream) {
  int64_t rows, h, v;
  RETURN_IF_ERROR(CheckLmHeadCeArgs("cpu::LmHeadCrossEntropy", hidden, weight, targets,
                                    row_weights, out, chunk_rows, &rows, &h, &v));
  if (!hidden.device().is_cpu())
    return InvalidArgumentError("cpu::LmHeadCrossEntropy: views must be on the CPU");
  const bf16* x = hidden.data_as<const bf16>();
  const int32_t* tgt = targets.data_as<const int32_t>();
  const float* w = row_weights.data_as<const float>();
  std::vector<float> wt(static_cast<size_t>(v * h));  // W as fp32 [V, H]
  for (int64_t i = 0; i < v * h; ++i) wt[i] = weight.data_as<const bf16>()[i].f();
  auto valid = [&](int64_t r) { return tgt[r] >= 0 && tgt[r] < v && w[r] != 0.f; };
  double wsum = 0;  // over rows with a target in range
  for (int64_t r = 0; r < rows; ++r) wsum += valid(r) ? w[r] : 0.f;
  const double inv_wsum = wsum != 0 ? 1.0 / wsum : 0.0;

  std::vector<float> xr(static_cast<size_t>(h)), logits(static_cast<size_t>(v)),
      dx(static_cast<size_t>(h));
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < h; ++k) xr[k] = x[r * h + k].f();
    int32_t best = 0;
    for (int64_t j = 0; j < v; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < h; ++k) acc += xr[k] * wt[j * h + k];
      logits[j] = acc;
      if (acc > logits[best]) best = static_cast<int32_t>(j);
    }
    double mx = logits[best], sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(logits[j]) - mx);
    const double lse = mx + std::log(sum);
    const bool ok = valid(r);
    if (ok) loss += w[r] * (lse - logits[tgt[r]]);
    if (!out.argmax.empty()) out.argmax.data_as<int32_t>()[r] = best;
    if (!out.correct.empty()) out.correct.data_as<uint8_t>()[r] = ok && best == tgt[r];
    if (out.dhidden.empty()) continue;
    std::fill(dx.begin(), dx.end(), 0.f);
    const double scale = ok ? w[r] * inv_wsum : 0.0;
    for (int64_t j = 0; j < v && scale != 0; ++j) {
      float g = static_cast<float>(
          (std::exp(static_cast<double>(logits[j]) - lse) - (j == tgt[r] ? 1.0 : 0.0)) * scale);
      for (int64_t k = 0; k < h; ++k) dx[k] += g * wt[j * h + k];
    }
    for (int64_t k = 0; k < h; ++k) out.dhidden.data_as<bf16>()[r * h + k] = bf16(dx[k]);
  }
  out.loss.data_as<float>()[0] = static_cast<float>(loss * inv_wsum);
  return Status::Ok();
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
Status LmHeadCrossEntropy(GemmContext*, const TensorView& hidden, const TensorView&,
                          const TensorView&, const TensorView&, const LmHeadCeOutputs&,
                          const TensorView&, int64_t, Stream) {
  return UnavailableError("LmHeadCrossEntropy: {} is on a CUDA device but tandem was built "
                          "without CUDA", hidden.ToString());
}
}  // namespace cuda
#endif

}  // namespace tandem::kernels
