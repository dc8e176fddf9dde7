// CPU reference of the FP8 LM head + cross-entropy (lm_head_ce_fp8.h), plus what both
// versions share: quantizing the head once, the argument checks, the workspace size and the
// device dispatch. The reference mirrors the device's rounding points: e4m3 hidden rows
// (1x128 groups), logits rounded to bf16, g rounded to bf16 then e4m3 (1x128 groups along V);
// each GEMM dequantizes both operands to fp32 and accumulates in float64.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dflash2/row_topk.h"
#include "kernels/loss/lm_head_ce_fp8.h"

namespace tandem::kernels {
namespace {

int64_t Up256(int64_t b) { return (b + 255) / 256 * 256; }

// u8 bytes of one block-scaled FP8 weight [n, k]: codes, then scales, each 256-aligned.
int64_t WeightBytes(int64_t n, int64_t k) {
  return Up256(n * k) + Up256(Fp8Blocks(n) * Fp8WeightScaleLd(k) * 4);
}

Fp8BlockWeight CarveWeight(char* base, int64_t* offset, int64_t n, int64_t k, Device device) {
  Fp8BlockWeight w;
  w.data = TensorView(base + *offset, DType::kF8E4M3, {n, k}, device);
  *offset += Up256(n * k);
  w.scale = TensorView(base + *offset, DType::kF32, {Fp8Blocks(n), Fp8WeightScaleLd(k)}, device);
  *offset += Up256(w.scale.nbytes());
  return w;
}

// x [m, k] (float) -> the dequantized e4m3 form with 1x128 groups per row.
Status QuantizeRows(std::vector<float>& x, int64_t m, int64_t k) {
  const int64_t mp = Fp8PaddedRows(m);
  std::vector<uint8_t> q(static_cast<size_t>(mp * k));
  std::vector<float> scale(static_cast<size_t>(Fp8ActScaleElems(mp, k)));
  const Fp8GroupActivation a{TensorView(q.data(), DType::kF8E4M3, {mp, k}),
                             TensorView(scale.data(), DType::kF32, {Fp8ActScaleElems(mp, k)})};
  RETURN_IF_ERROR(cpu::QuantizeFp8Activation(TensorView(x.data(), DType::kF32, {m, k}), a, nullptr));
  std::vector<float> deq(static_cast<size_t>(mp * k));
  RETURN_IF_ERROR(cpu::DequantizeFp8Activation(a, TensorView(deq.data(), DType::kF32, {mp, k}), nullptr));
  std::copy(deq.begin(), deq.begin() + m * k, x.begin());
  return Status::Ok();
}

float RoundBf16(double v) { return bf16(static_cast<float>(v)).f(); }

}  // namespace

Result<Fp8LmHeadWeights> Fp8LmHeadWeights::Quantize(const TensorView& weight, Allocator& alloc,
                                                    Stream stream) {
  if (weight.ndim() != 2)
    return InvalidArgumentError("Fp8LmHeadWeights::Quantize: weight {} must be [V, H]",
                                weight.ToString());
  const int64_t v = weight.dim(0), h = weight.dim(1);
  Fp8LmHeadWeights out;
  ASSIGN_OR_RETURN(out.storage_, Tensor::Empty(alloc, DType::kU8,
                                               {std::max<int64_t>(WeightBytes(v, h) + WeightBytes(h, v), 1)},
                                               stream));
  char* base = static_cast<char*>(out.storage_.data());
  int64_t offset = 0;
  out.head_.w = CarveWeight(base, &offset, v, h, alloc.device());
  out.head_.wt = CarveWeight(base, &offset, h, v, alloc.device());
  RETURN_IF_ERROR(QuantizeFp8Weight(weight, out.head_.w, stream)
                      .WithContext("Fp8LmHeadWeights::Quantize"));
  RETURN_IF_ERROR(TransposeFp8Weight(out.head_.w, out.head_.wt, stream)
                      .WithContext("Fp8LmHeadWeights::Quantize"));
  return out;
}

int64_t LmHeadCeFp8WorkspaceBytes(int64_t rows, int64_t vocab, int64_t hidden,
                                  int64_t chunk_rows) {
  const int64_t cp = Fp8PaddedRows(std::min(rows, chunk_rows));
  const int64_t ld = (vocab + 7) / 8 * 8;
  return Up256(cp * ld * 2) + Up256(rows * 4) + 256                       // logits, losses, sum
         + Up256(cp * hidden) + Up256(Fp8ActScaleElems(cp, hidden) * 4)  // e4m3 hidden
         + Up256(cp * vocab) + Up256(Fp8ActScaleElems(cp, vocab) * 4)    // e4m3 g
         + Up256(cp * hidden * 2);                                       // ragged d hidden
}

Status internal::CheckLmHeadCeFp8Args(const char* op, const TensorView& hidden,
                                      const Fp8LmHead& head, const TensorView& targets,
                                      const TensorView& row_weights, const LmHeadCeOutputs& out,
                                      int64_t chunk_rows, const LmHeadCeTransform& transform,
                                      int64_t* rows, int64_t* hidden_dim) {
  RETURN_IF_ERROR(CheckFp8Transpose(op, head.w, head.wt));
  RETURN_IF_ERROR(
      dflash2::internal::CheckLogitTransform(op, transform.multiplier, transform.softcap));
  RETURN_IF_ERROR(CheckLmHeadCeRows(op, hidden, head.vocab(), targets, row_weights, out,
                                    chunk_rows, rows, hidden_dim));
  if (*hidden_dim != head.hidden())
    return InvalidArgumentError("{}: hidden {} does not match the FP8 LM head [{}, {}]", op,
                                hidden.ToString(), head.vocab(), head.hidden());
  return ExpectSameDevice(op, hidden, head.w.data);
}

Status LmHeadCrossEntropyFp8(GemmContext* ctx, const TensorView& hidden, const Fp8LmHead& head,
                             const TensorView& targets, const TensorView& row_weights,
                             const LmHeadCeOutputs& out, const TensorView& workspace,
                             int64_t chunk_rows, Stream s, const LmHeadCeTransform& transform) {
  if (hidden.device().is_cpu())
    return cpu::LmHeadCrossEntropyFp8(ctx, hidden, head, targets, row_weights, out, workspace,
                                      chunk_rows, s, transform);
  return cuda::LmHeadCrossEntropyFp8(ctx, hidden, head, targets, row_weights, out, workspace,
                                     chunk_rows, s, transform);
}

namespace cpu {

Status LmHeadCrossEntropyFp8(GemmContext*, const TensorView& hidden, const Fp8LmHead& head,
                             const TensorView& targets, const TensorView& row_weights,
                             const LmHeadCeOutputs& out, const TensorView&, int64_t chunk_rows,
                             Stream, const LmHeadCeTransform& transform) {
  constexpr const char* kOp = "cpu::LmHeadCrossEntropyFp8";
  int64_t rows, h;
  RETURN_IF_ERROR(internal::CheckLmHeadCeFp8Args(kOp, hidden, head, targets, row_weights, out,
                                                 chunk_rows, transform, &rows, &h));
  if (!hidden.device().is_cpu()) return InvalidArgumentError("{}: views must be on the CPU", kOp);
  const int64_t v = head.vocab();
  std::vector<float> x(static_cast<size_t>(rows * h)), w(static_cast<size_t>(v * h)),
      wt(static_cast<size_t>(h * v));
  for (int64_t i = 0; i < rows * h; ++i) x[i] = hidden.data_as<const bf16>()[i].f();
  RETURN_IF_ERROR(QuantizeRows(x, rows, h));
  RETURN_IF_ERROR(cpu::DequantizeFp8Weight(head.w, TensorView(w.data(), DType::kF32, {v, h}), nullptr));
  RETURN_IF_ERROR(cpu::DequantizeFp8Weight(head.wt, TensorView(wt.data(), DType::kF32, {h, v}), nullptr));
  const int32_t* tgt = targets.data_as<const int32_t>();
  const float* rw = row_weights.data_as<const float>();
  auto valid = [&](int64_t r) { return tgt[r] >= 0 && tgt[r] < v && rw[r] != 0.f; };
  double wsum = 0;
  for (int64_t r = 0; r < rows; ++r) wsum += valid(r) ? rw[r] : 0.f;
  const double inv_wsum = wsum != 0 ? 1.0 / wsum : 0.0;

  std::vector<float> g(static_cast<size_t>(rows * v), 0.f), logits(static_cast<size_t>(v)),
      slope(static_cast<size_t>(v), 1.f);
  const float m = transform.multiplier, cap = transform.softcap;
  const int64_t topk = out.topk_ids.empty() ? 0 : out.topk_ids.dim(1);
  std::vector<int32_t> order;
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t best = 0;
    for (int64_t j = 0; j < v; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < h; ++k) acc += double(x[r * h + k]) * w[j * h + k];
      logits[j] = RoundBf16(acc);  // the GEMM's bf16 output, then the transform in float
      if (!transform.identity()) {
        logits[j] = dflash2::internal::TransformLogit(logits[j], m, cap);
        slope[j] = cap > 0.f ? m * (1.f - (logits[j] / cap) * (logits[j] / cap)) : m;
      }
      if (logits[j] > logits[best]) best = static_cast<int32_t>(j);
    }
    if (topk > 0) internal::WriteRowTopK(logits.data(), v, topk, r, out, &order);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(double(logits[j]) - logits[best]);
    const double lse = logits[best] + std::log(sum);
    const bool ok = valid(r);
    if (ok) loss += rw[r] * (lse - logits[tgt[r]]);
    if (!out.argmax.empty()) out.argmax.data_as<int32_t>()[r] = best;
    if (!out.correct.empty()) out.correct.data_as<uint8_t>()[r] = ok && best == tgt[r];
    const double scale = ok ? rw[r] * inv_wsum : 0.0;
    for (int64_t j = 0; j < v && scale != 0; ++j) {
      float gj = static_cast<float>((std::exp(double(logits[j]) - lse) -
                                     (j == tgt[r] ? 1.0 : 0.0)) * scale);
      if (!transform.identity()) gj *= slope[j];
      g[r * v + j] = RoundBf16(gj);
    }
  }
  out.loss.data_as<float>()[0] = static_cast<float>(loss * inv_wsum);
  if (out.dhidden.empty()) return Status::Ok();
  RETURN_IF_ERROR(QuantizeRows(g, rows, v));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < h; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < v; ++j) acc += double(g[r * v + j]) * wt[k * v + j];
      out.dhidden.data_as<bf16>()[r * h + k] = bf16(static_cast<float>(acc));
    }
  return Status::Ok();
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
Status LmHeadCrossEntropyFp8(GemmContext*, const TensorView& hidden, const Fp8LmHead&,
                             const TensorView&, const TensorView&, const LmHeadCeOutputs&,
                             const TensorView&, int64_t, Stream, const LmHeadCeTransform&) {
  return UnavailableError("LmHeadCrossEntropyFp8: {} is on a CUDA device but tandem was built "
                          "without CUDA", hidden.ToString());
}
}  // namespace cuda
#endif

}  // namespace tandem::kernels
