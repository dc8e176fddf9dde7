// CPU reference for the fused LM head + cross-entropy: for each row, fp32 logits against
// every vocab row of W, logsumexp and softmax in float64, then dHidden accumulated in fp32.
// Also holds the shared argument checks, the workspace size and the device dispatch.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/dflash2/row_topk.h"
#include "kernels/elementwise/row_topk.h"
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
  if (!out.topk_ids.empty()) {
    int64_t k;
    RETURN_IF_ERROR(dflash2::internal::CheckTopKOutputs(op, out.topk_ids, out.topk_values, r,
                                                        vocab, hidden.device(), &k));
  } else if (!out.topk_values.empty()) {
    return InvalidArgumentError("{}: topk_values {} needs topk_ids", op,
                                out.topk_values.ToString());
  }
  if (chunk_rows <= 0)
    return InvalidArgumentError("{}: chunk_rows must be positive, got {}", op, chunk_rows);
  if (vocab <= 0) return InvalidArgumentError("{}: empty vocabulary", op);
  return Status::Ok();
}

Status LmHeadCrossEntropy(GemmContext* ctx, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView& workspace,
                          int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform) {
  if (hidden.device().is_cpu())
    return cpu::LmHeadCrossEntropy(ctx, hidden, weight, targets, row_weights, out, workspace,
                                   chunk_rows, s, transform);
  return cuda::LmHeadCrossEntropy(ctx, hidden, weight, targets, row_weights, out, workspace,
                                  chunk_rows, s, transform);
}

void internal::WriteRowTopK(const float* z, int64_t vocab, int64_t k, int64_t r,
                            const LmHeadCeOutputs& out, std::vector<int32_t>* order) {
  auto key = [&](int32_t j) { return kernels::internal::TopKKey(std::bit_cast<uint32_t>(z[j])); };
  order->resize(static_cast<size_t>(vocab));
  std::iota(order->begin(), order->end(), 0);
  std::partial_sort(order->begin(), order->begin() + k, order->end(), [&](int32_t a, int32_t b) {
    return key(a) > key(b) || (key(a) == key(b) && a < b);
  });
  for (int64_t i = 0; i < k; ++i) {
    out.topk_ids.data_as<int32_t>()[r * k + i] = (*order)[i];
    if (!out.topk_values.empty()) out.topk_values.data_as<float>()[r * k + i] = z[(*order)[i]];
  }
}

namespace cpu {

Status LmHeadCrossEntropy(GemmContext*, const TensorView& hidden, const TensorView& weight,
                          const TensorView& targets, const TensorView& row_weights,
                          const LmHeadCeOutputs& out, const TensorView&, int64_t chunk_rows,
                          Stream, const LmHeadCeTransform& transform) {
  constexpr const char* kOp = "cpu::LmHeadCrossEntropy";
  int64_t rows, h, v;
  RETURN_IF_ERROR(CheckLmHeadCeArgs(kOp, hidden, weight, targets, row_weights, out, chunk_rows,
                                    &rows, &h, &v));
  RETURN_IF_ERROR(
      dflash2::internal::CheckLogitTransform(kOp, transform.multiplier, transform.softcap));
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
      dx(static_cast<size_t>(h)), slope(static_cast<size_t>(v));
  const float m = transform.multiplier, cap = transform.softcap;
  const int64_t k = out.topk_ids.empty() ? 0 : out.topk_ids.dim(1);
  std::vector<int32_t> order(static_cast<size_t>(v));
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < h; ++i) xr[i] = x[r * h + i].f();
    int32_t best = 0;
    for (int64_t j = 0; j < v; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < h; ++i) acc += xr[i] * wt[j * h + i];
      // The transformed logit z and dz/dx (the identity stays exact).
      const float z = transform.identity() ? acc : dflash2::internal::TransformLogit(acc, m, cap);
      slope[j] = cap > 0.f ? m * (1.f - (z / cap) * (z / cap)) : m;
      logits[j] = z;
      if (z > logits[best]) best = static_cast<int32_t>(j);
    }
    if (k > 0) internal::WriteRowTopK(logits.data(), v, k, r, out, &order);
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
      if (!transform.identity()) g *= slope[j];
      for (int64_t i = 0; i < h; ++i) dx[i] += g * wt[j * h + i];
    }
    for (int64_t i = 0; i < h; ++i) out.dhidden.data_as<bf16>()[r * h + i] = bf16(dx[i]);
  }
  out.loss.data_as<float>()[0] = static_cast<float>(loss * inv_wsum);
  return Status::Ok();
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
Status LmHeadCrossEntropy(GemmContext*, const TensorView& hidden, const TensorView&,
                          const TensorView&, const TensorView&, const LmHeadCeOutputs&,
                          const TensorView&, int64_t, Stream, const LmHeadCeTransform&) {
  return UnavailableError("LmHeadCrossEntropy: {} is on a CUDA device but tandem was built "
                          "without CUDA", hidden.ToString());
}
}  // namespace cuda
#endif

}  // namespace tandem::kernels
