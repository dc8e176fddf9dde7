// Qwen3Target::Extend: the forward over a few new tokens with a KV cache (decoding).
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/core/stream.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/norm/rmsnorm.h"
#include "models/qwen3/qwen3_target.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

Status Qwen3Target::CheckExtend(const Qwen3KvCache& cache, std::span<const int32_t> tokens,
                                std::span<const LayerCapture> captures,
                                const TensorView& logits) const {
  const TransformerConfig& c = config();
  const int64_t b = static_cast<int64_t>(tokens.size());
  if (b < 1 || b > options_.max_tokens)
    return InvalidArgumentError("Qwen3Target::Extend: {} tokens; this target takes 1..{}", b,
                                options_.max_tokens);
  if (cache.num_layers() != c.num_hidden_layers || !(cache.device() == device()) ||
      cache.keys(0).dim(1) != c.num_key_value_heads || cache.keys(0).dim(2) != c.head_dim)
    return InvalidArgumentError(
        "Qwen3Target::Extend: the cache ({} layers, [{}] per layer) does not fit this model "
        "({} layers, kv heads {}, head_dim {}, on {})",
        cache.num_layers(), cache.keys(0).ToString(), c.num_hidden_layers,
        c.num_key_value_heads, c.head_dim, device().is_cpu() ? "cpu" : "cuda");
  if (cache.length() + b > cache.capacity())
    return InvalidArgumentError(
        "Qwen3Target::Extend: {} cached + {} new tokens exceed the cache's capacity {}",
        cache.length(), b, cache.capacity());
  for (int64_t i = 0; i < b; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      return InvalidArgumentError("Qwen3Target::Extend: token {} is id {}, not in [0, {})", i,
                                  tokens[i], c.vocab_size);
  return CheckExtendOutputs(b, captures, logits);
}

Status Qwen3Target::CheckExtendOutputs(int64_t b, std::span<const LayerCapture> captures,
                                       const TensorView& logits) const {
  const TransformerConfig& c = config();
  std::vector<bool> seen(static_cast<size_t>(c.num_hidden_layers), false);
  for (const LayerCapture& cap : captures) {
    if (cap.layer < 0 || cap.layer >= c.num_hidden_layers || seen[cap.layer])
      return InvalidArgumentError(
          "Qwen3Target::Extend: capture layer {} is out of [0, {}) or repeated", cap.layer,
          c.num_hidden_layers);
    seen[cap.layer] = true;
    if (!(cap.out.device() == device()) || cap.out.dtype() != DType::kBF16 ||
        !(cap.out.shape() == Shape{b, c.hidden_size}) || !cap.out.is_contiguous())
      return InvalidArgumentError(
          "Qwen3Target::Extend: capture of layer {} must be a contiguous bf16 [{}, {}] on the "
          "model's device, got {}", cap.layer, b, c.hidden_size, cap.out.ToString());
  }
  if (!logits.empty() &&
      (!(logits.device() == device()) || !logits.is_contiguous() ||
       !(logits.shape() == Shape{b, c.vocab_size}) ||
       (logits.dtype() != DType::kBF16 && logits.dtype() != DType::kF32)))
    return InvalidArgumentError(
        "Qwen3Target::Extend: logits must be a contiguous bf16/f32 [{}, {}] on the model's "
        "device, got {}", b, c.vocab_size, logits.ToString());
  return Status::Ok();
}

Status Qwen3Target::Extend(Qwen3KvCache& cache, std::span<const int32_t> tokens,
                           std::span<const LayerCapture> captures, TensorView logits) {
  RETURN_IF_ERROR(CheckExtend(cache, tokens, captures, logits));
  const kernels::Stream s = options_.stream;
  const int64_t t = static_cast<int64_t>(tokens.size()), past = cache.length();
  std::optional<kernels::DeviceGuard> guard;
  if (device().is_cuda()) guard.emplace(device().index);
  kernels::NvtxRange range("Qwen3Target::Extend");

  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[i] = static_cast<int32_t>(past + i);
  PackedBatch batch;
  batch.input_ids = cache.id_staging().Narrow(0, 0, t);
  batch.position_ids = cache.position_staging().Narrow(0, 0, t);
  RETURN_IF_ERROR(kernels::CopyFromHost(batch.input_ids, tokens.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(batch.position_ids, positions.data(), s));
  // A prefill into the empty cache on CUDA: the new tokens attend only to each other, so the
  // packed causal kernel of the training forward does it (the cached kernel runs one CTA per
  // query on CUDA cores). The CPU keeps the cached reference: it reproduces a prefill exactly.
  if (device().is_cuda() && past == 0 && t > 1) {
    const int32_t cu[2] = {0, static_cast<int32_t>(t)};
    batch.cu_seqlens = cache.cu_seqlens_staging();
    RETURN_IF_ERROR(kernels::CopyFromHost(batch.cu_seqlens, cu, s));
  }

  const SeqRows seq{&cache, 0, t};
  return ExtendRows(batch, t, {&seq, 1}, captures, logits);
}

Status Qwen3Target::ExtendRows(const PackedBatch& batch, int64_t t, std::span<const SeqRows> seqs,
                               std::span<const LayerCapture> captures, TensorView logits) {
  const TransformerConfig& c = config();
  const kernels::Stream s = options_.stream;
  // Every layer runs, even past the last capture: each one's cache rows must be written.
  const int last = static_cast<int>(c.num_hidden_layers) - 1;
  const TensorView hidden = act_.hidden.Narrow(0, 0, t);
  RETURN_IF_ERROR(kernels::EmbeddingForward(hidden, batch.input_ids, weights_.embed(), s));
  // cu_seqlens set: one sequence's prefill into its empty cache (Extend), t rows long.
  const int max_seqlen = batch.cu_seqlens.empty() ? 0 : static_cast<int>(t);
  std::vector<KvSlot> kv(seqs.size());
  for (int i = 0; i <= last; ++i) {
    for (size_t j = 0; j < seqs.size(); ++j)
      kv[j] = {seqs[j].cache->keys(i), seqs[j].cache->values(i), seqs[j].cache->length(),
               seqs[j].row, seqs[j].rows};
    const Status st = options_.precision == TargetPrecision::kFp8
                          ? LayerFp8(static_cast<size_t>(i), batch, t, max_seqlen, kv)
                          : Layer(weights_.layers()[i], batch, t, max_seqlen, kv);
    RETURN_IF_ERROR(st.WithContext(fmt::format("layer {}", i)));
    for (const LayerCapture& cap : captures)
      if (cap.layer == i) RETURN_IF_ERROR(kernels::Copy(cap.out, hidden, s));
  }
  for (const SeqRows& q : seqs) q.cache->Grow(q.rows);
  if (logits.empty()) return Status::Ok();
  const TensorView normed = act_.normed.Narrow(0, 0, t);
  RETURN_IF_ERROR(kernels::RmsNormForward(normed, {}, hidden, weights_.final_norm(),
                                          static_cast<float>(c.rms_norm_eps), s));
  kernels::GemmOptions linear;
  linear.trans_b = true;
  return kernels::Gemm(gemm_.get(), normed, weights_.lm_head(), logits, linear, s);
}

}  // namespace tandem::models
