// Qwen3Target::ExtendBatch: one KV-cache forward over several sequences (batched decoding).
#include <optional>
#include <vector>

#include "kernels/core/stream.h"
#include "models/qwen3/qwen3_target.h"

namespace tandem::models {

using kernels::TensorView;

Status Qwen3Target::ExtendBatch(Qwen3BatchKvCache& cache, std::span<const BatchExtendPart> parts,
                                std::span<const LayerCapture> captures, TensorView logits) {
  if (parts.empty()) return InvalidArgumentError("Qwen3Target::ExtendBatch: no parts");
  std::vector<bool> used(static_cast<size_t>(cache.sequences()), false);
  std::vector<int32_t> ids, positions;
  std::vector<SeqRows> seqs;
  for (size_t p = 0; p < parts.size(); ++p) {
    const BatchExtendPart& part = parts[p];
    if (part.sequence < 0 || part.sequence >= cache.sequences() || used[part.sequence])
      return InvalidArgumentError(
          "Qwen3Target::ExtendBatch: part {} names sequence {}, not in [0, {}) or repeated", p,
          part.sequence, cache.sequences());
    used[part.sequence] = true;
    Qwen3KvCache& seq = cache.sequence(part.sequence);
    RETURN_IF_ERROR(CheckExtend(seq, part.tokens, {}, {})
                        .WithContext(fmt::format("ExtendBatch part {} (sequence {})", p,
                                                 part.sequence)));
    const int64_t n = static_cast<int64_t>(part.tokens.size()), past = seq.length();
    seqs.push_back({&seq, static_cast<int64_t>(ids.size()), n});
    ids.insert(ids.end(), part.tokens.begin(), part.tokens.end());
    for (int64_t i = 0; i < n; ++i) positions.push_back(static_cast<int32_t>(past + i));
  }
  const int64_t t = static_cast<int64_t>(ids.size());
  if (t > options_.max_tokens || t > cache.id_staging().dim(0))
    return InvalidArgumentError(
        "Qwen3Target::ExtendBatch: {} rows in all; this target takes at most {} (staging {})",
        t, options_.max_tokens, cache.id_staging().dim(0));
  RETURN_IF_ERROR(CheckExtendOutputs(t, captures, logits));
  const kernels::Stream s = options_.stream;
  std::optional<kernels::DeviceGuard> guard;
  if (device().is_cuda()) guard.emplace(device().index);
  kernels::NvtxRange range("Qwen3Target::ExtendBatch");
  PackedBatch batch;
  batch.input_ids = cache.id_staging().Narrow(0, 0, t);
  batch.position_ids = cache.position_staging().Narrow(0, 0, t);
  RETURN_IF_ERROR(kernels::CopyFromHost(batch.input_ids, ids.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(batch.position_ids, positions.data(), s));
  return ExtendRows(batch, t, seqs, captures, logits);
}

}  // namespace tandem::models
