// Qwen35Target::Extend: the hybrid forward over a few new tokens with a decode cache
// (qwen3_5_cache.h): gated-attention layers attend over their cached keys and values, Gated
// DeltaNet layers continue their conv and delta-rule state. Every layer runs, even past the
// last capture: each one's cache must advance.
#include <optional>
#include <vector>

#include "kernels/core/stream.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/linear_attention/hybrid_ops.h"
#include "models/qwen3_5/qwen3_5_target.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

namespace {
constexpr const char* kOp = "Qwen35Target::Extend";
}  // namespace

Status Qwen35Target::CheckExtend(const Qwen35Cache& cache, std::span<const int32_t> tokens,
                                 std::span<const HybridCapture> captures,
                                 const TensorView& logits) const {
  const Qwen35Config& c = config();
  const int64_t b = static_cast<int64_t>(tokens.size());
  if (b < 1 || b > options_.max_tokens)
    return InvalidArgumentError("{}: {} tokens; this target takes 1..{}", kOp, b,
                                options_.max_tokens);
  RETURN_IF_ERROR(cache.CheckFits(c).WithContext(kOp));
  if (!(cache.device() == device()))
    return InvalidArgumentError("{}: the cache is on another device than the model", kOp);
  if (cache.length() + b > cache.capacity())
    return InvalidArgumentError("{}: {} cached + {} new tokens exceed the cache's capacity {}", kOp,
                                cache.length(), b, cache.capacity());
  for (int64_t i = 0; i < b; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      return InvalidArgumentError("{}: token {} is id {}, not in [0, {})", kOp, i, tokens[i],
                                  c.vocab_size);
  std::vector<bool> seen(static_cast<size_t>(c.num_hidden_layers), false);
  for (const HybridCapture& cap : captures) {
    if (cap.layer < 0 || cap.layer >= c.num_hidden_layers || seen[cap.layer])
      return InvalidArgumentError("{}: capture layer {} is out of [0, {}) or repeated", kOp,
                                  cap.layer, c.num_hidden_layers);
    seen[cap.layer] = true;
    if (!(cap.out.device() == device()) || cap.out.dtype() != DType::kBF16 ||
        !(cap.out.shape() == Shape{b, c.hidden_size}) || !cap.out.is_contiguous())
      return InvalidArgumentError(
          "{}: capture of layer {} must be a contiguous bf16 [{}, {}] on the model's device, "
          "got {}",
          kOp, cap.layer, b, c.hidden_size, cap.out.ToString());
  }
  if (!logits.empty() && (!(logits.device() == device()) || !logits.is_contiguous() ||
                          !(logits.shape() == Shape{b, c.vocab_size}) ||
                          (logits.dtype() != DType::kBF16 && logits.dtype() != DType::kF32)))
    return InvalidArgumentError(
        "{}: logits must be a contiguous bf16/f32 [{}, {}] on the model's device, got {}", kOp, b,
        c.vocab_size, logits.ToString());
  return Status::Ok();
}

Status Qwen35Target::Extend(Qwen35Cache& cache, std::span<const int32_t> tokens,
                            std::span<const HybridCapture> captures, TensorView logits) {
  RETURN_IF_ERROR(CheckExtend(cache, tokens, captures, logits));
  const Qwen35Config& c = config();
  const kernels::Stream s = options_.stream;
  const int64_t t = static_cast<int64_t>(tokens.size()), past = cache.length();
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::optional<kernels::DeviceGuard> guard;
  if (device().is_cuda()) guard.emplace(device().index);
  kernels::NvtxRange range(kOp);

  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(past + i);
  HybridBatch batch;  // one document; cu_seqlens is not read on the decode path
  batch.input_ids = cache.id_staging().Narrow(0, 0, t);
  batch.position_ids = cache.position_staging().Narrow(0, 0, t);
  RETURN_IF_ERROR(kernels::CopyFromHost(batch.input_ids, tokens.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(batch.position_ids, positions.data(), s));

  const TensorView hidden = View(kHidden, t, c.hidden_size);
  const TensorView normed = View(kNormed, t, c.hidden_size);
  RETURN_IF_ERROR(kernels::EmbeddingForward(hidden, batch.input_ids, weights_.embed(), s));
  cache.BeginExtend();
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const Qwen35LayerWeights& w = weights_.layers()[i];
    Status st;
    if (w.type == HybridLayerType::kLinearAttention) {
      const Qwen35LinearDecode dec = cache.Linear(i, t);
      st = Layer(i, batch, t, 0, &dec, nullptr);
    } else {
      const KvRows kv{cache.keys(i), cache.values(i), past};
      st = Layer(i, batch, t, static_cast<int>(past + t), nullptr, &kv);
    }
    RETURN_IF_ERROR(
        st.WithContext(fmt::format("{}: layer {} ({})", kOp, i, HybridLayerTypeName(w.type))));
    for (const HybridCapture& cap : captures)
      if (cap.layer == i) RETURN_IF_ERROR(kernels::Copy(cap.out, hidden, s));
  }
  cache.Commit(t);
  if (logits.empty()) return Status::Ok();
  RETURN_IF_ERROR(
      kernels::ZeroCentredRmsNormForward(normed, hidden, weights_.final_norm(), eps, s));
  kernels::GemmOptions linear;
  linear.trans_b = true;
  return kernels::Gemm(gemm_.get(), normed, weights_.lm_head(), logits, linear, s);
}

}  // namespace tandem::models
