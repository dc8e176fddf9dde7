#include "bench/fidelity_golden.h"

#include <algorithm>
#include <string>

#include "models/io/safetensors.h"

namespace tandem::bench {
namespace {

constexpr int kMaxLayerId = 4096;  // hidden.{i} names looked for

Result<std::vector<int32_t>> ReadI32(const models::SafetensorsReader& r, const std::string& path,
                                     const char* name) {
  const models::TensorInfo* t = r.Find(name);
  if (t == nullptr) return NotFoundError("{}: no `{}` tensor (a fidelity golden holds the "
                                         "packed batch: input_ids, position_ids, cu_seqlens)",
                                         path, name);
  if (t->shape.size() != 1)
    return InvalidArgumentError("{}: `{}` must be 1-d, has {} dimensions", path, name,
                                t->shape.size());
  std::vector<int32_t> v(static_cast<size_t>(t->numel()));
  RETURN_IF_ERROR(r.Read(*t, kernels::DType::kI32, v.data(), t->numel() * 4));
  return v;
}

Status CheckBatch(const FidelityGolden& g) {
  const std::string& p = g.path;
  if (g.ids.empty()) return InvalidArgumentError("{}: `input_ids` is empty", p);
  if (g.pos.size() != g.ids.size())
    return InvalidArgumentError("{}: `position_ids` has {} entries, `input_ids` {}", p,
                                g.pos.size(), g.ids.size());
  if (g.cu.size() < 2 || g.cu.front() != 0 || g.cu.back() != g.tokens())
    return InvalidArgumentError("{}: `cu_seqlens` must run from 0 to the token count {}", p,
                                g.tokens());
  for (int64_t d = 0; d < g.documents(); ++d) {
    const int64_t len = int64_t{g.cu[d + 1]} - g.cu[d];
    if (len < kFidelityTailRows)
      return InvalidArgumentError(
          "{}: document {} (`cu_seqlens`[{}..{}]) has {} tokens, fewer than the {} of the "
          "logits tail",
          p, d, d, d + 1, len, kFidelityTailRows);
    for (int64_t i = 0; i < len; ++i)
      if (g.pos[g.cu[d] + i] != i)
        return InvalidArgumentError("{}: `position_ids`[{}] is {}; positions restart at 0 in "
                                    "every document (document {}, token {})",
                                    p, g.cu[d] + i, g.pos[g.cu[d] + i], d, i);
  }
  return Status::Ok();
}

}  // namespace

Result<FidelityGolden> ReadFidelityGolden(const std::string& path) {
  ASSIGN_OR_RETURN(models::SafetensorsReader r, models::SafetensorsReader::Open(path));
  FidelityGolden g;
  g.path = path;
  ASSIGN_OR_RETURN(g.ids, ReadI32(r, path, "input_ids"));
  ASSIGN_OR_RETURN(g.pos, ReadI32(r, path, "position_ids"));
  ASSIGN_OR_RETURN(g.cu, ReadI32(r, path, "cu_seqlens"));
  RETURN_IF_ERROR(CheckBatch(g));
  for (int l = 0; l < kMaxLayerId; ++l) {
    const std::string name = "hidden." + std::to_string(l);
    const models::TensorInfo* t = r.Find(name);
    if (t == nullptr) continue;
    if (t->shape.size() != 2 || t->shape[0] != g.tokens())
      return InvalidArgumentError("{}: `{}` must be [{}, H] (one row per token), is {}-d with "
                                  "{} rows",
                                  path, name, g.tokens(), t->shape.size(),
                                  t->shape.empty() ? 0 : t->shape[0]);
    if (g.hidden_size == 0) g.hidden_size = t->shape[1];
    if (t->shape[1] != g.hidden_size)
      return InvalidArgumentError("{}: `{}` is {} wide, hidden.{} {}", path, name, t->shape[1],
                                  g.layers.front(), g.hidden_size);
    g.layers.push_back(l);
  }
  if (g.layers.empty())
    return NotFoundError("{}: no hidden.{{i}} tensors (the reference layer outputs)", path);
  if (const models::TensorInfo* t = r.Find("logits_tail")) {
    if (t->shape.size() != 2 || t->shape[0] != kFidelityTailRows * g.documents())
      return InvalidArgumentError("{}: `logits_tail` must be [{} x {} documents, V]", path,
                                  kFidelityTailRows, g.documents());
    g.vocab_size = t->shape[1];
  }
  for (int64_t d = 0; d < g.documents(); ++d)
    g.max_seqlen = std::max(g.max_seqlen, g.cu[d + 1] - g.cu[d]);
  return g;
}

Status CheckGoldenFitsModel(const FidelityGolden& g, const FidelityModelShape& m) {
  if (g.hidden_size != m.hidden_size)
    return InvalidArgumentError("{}: hidden.{} is {} wide, but hidden_size is {} in {}: the "
                                "golden was made for another model",
                                g.path, g.layers.front(), g.hidden_size, m.hidden_size, m.source);
  if (g.vocab_size != 0 && g.vocab_size != m.vocab_size)
    return InvalidArgumentError("{}: logits_tail is {} wide, but vocab_size is {} in {}: the "
                                "golden was made for another model",
                                g.path, g.vocab_size, m.vocab_size, m.source);
  for (size_t i = 0; i < g.ids.size(); ++i)
    if (g.ids[i] < 0 || g.ids[i] >= m.vocab_size)
      return InvalidArgumentError("{}: input_ids[{}] is {}, outside vocab_size {} of {}", g.path,
                                  i, g.ids[i], m.vocab_size, m.source);
  if (g.layers.back() >= m.num_hidden_layers)
    return InvalidArgumentError("{}: hidden.{} names a layer the model lacks: "
                                "num_hidden_layers is {} in {}",
                                g.path, g.layers.back(), m.num_hidden_layers, m.source);
  return Status::Ok();
}

}  // namespace tandem::bench
