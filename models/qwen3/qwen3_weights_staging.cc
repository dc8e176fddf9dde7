// ProjectionStaging (qwen3_weights_internal.h): one layer's bf16 projections at a time.
#include <charconv>

#include "models/qwen3/qwen3_weights_internal.h"

namespace tandem::models {

using kernels::DType;
using kernels::TensorView;

std::optional<ProjectionName> ParseProjectionName(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  ProjectionName p;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), p.layer);
  if (ec != std::errc() || end == name.data()) return std::nullopt;
  const std::string_view rest = name.substr(static_cast<size_t>(end - name.data()));
  static constexpr std::string_view kSuffixes[kProjectionsPerLayer] = {
      ".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight",
      ".self_attn.o_proj.weight", ".mlp.gate_proj.weight",    ".mlp.up_proj.weight",
      ".mlp.down_proj.weight"};
  for (int k = 0; k < kProjectionsPerLayer; ++k) {
    if (rest == kSuffixes[k]) {
      p.kind = k;
      return p;
    }
  }
  return std::nullopt;
}

Result<TensorView> ProjectionStaging::Destination(const ProjectionName& p) {
  if (p.layer < 0 || p.layer >= config_.num_hidden_layers)
    return InvalidArgumentError("model.layers.{}: the config has {} layers", p.layer,
                                config_.num_hidden_layers);
  Slot& slot = slots_[p.layer];
  if (slot.done)
    return DataLossError("model.layers.{}: a projection arrived after the layer was complete "
                         "(duplicate tensor?)", p.layer);
  if (slot.buffer.empty()) {
    const int64_t h = config_.hidden_size, q = config_.q_dim(), kv = config_.kv_dim(),
                  ff = config_.intermediate_size;
    // q, k, v, o, gate|up (adjacent: one [2I, H] matrix), down; each 256-byte aligned.
    const int64_t elems[] = {q * h, kv * h, kv * h, h * q, 2 * ff * h, h * ff};
    int64_t offsets[6], total = 0;
    for (int i = 0; i < 6; ++i) {
      offsets[i] = total;
      total += (elems[i] * 2 + 255) / 256 * 256;
    }
    ASSIGN_OR_RETURN(slot.buffer, kernels::Tensor::Empty(alloc_, DType::kU8, {total}, stream_));
    char* base = static_cast<char*>(slot.buffer.data());
    auto view = [&](int i, int64_t rows, int64_t cols) {
      return TensorView(base + offsets[i], DType::kBF16, {rows, cols}, device_);
    };
    Qwen3LayerWeights& v = slot.views;
    v.q_proj = view(0, q, h);
    v.k_proj = view(1, kv, h);
    v.v_proj = view(2, kv, h);
    v.o_proj = view(3, h, q);
    v.gate_up = view(4, 2 * ff, h);
    v.down_proj = view(5, h, ff);
    slot.gate = v.gate_up.Narrow(0, 0, ff);
    slot.up = v.gate_up.Narrow(0, ff, ff);
  }
  const Qwen3LayerWeights& v = slot.views;
  const TensorView by_kind[kProjectionsPerLayer] = {v.q_proj, v.k_proj,  v.v_proj, v.o_proj,
                                                    slot.gate, slot.up, v.down_proj};
  return by_kind[p.kind];
}

Status ProjectionStaging::Arrived(const ProjectionName& p) {
  Slot& slot = slots_.at(p.layer);
  if (++slot.arrived < kProjectionsPerLayer) return Status::Ok();
  RETURN_IF_ERROR(sink_(p.layer, slot.views, stream_)
                      .WithContext(fmt::format("model.layers.{} projections", p.layer)));
  slot.done = true;
  slot.buffer = kernels::Tensor();  // back to the pool, ordered after the sink's work
  slot.views = Qwen3LayerWeights();
  return Status::Ok();
}

Status ProjectionStaging::CheckComplete() const {
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    auto it = slots_.find(l);
    if (it == slots_.end() || !it->second.done)
      return DataLossError("model.layers.{}: {} of its {} projection weights were read", l,
                           it == slots_.end() ? 0 : it->second.arrived, kProjectionsPerLayer);
  }
  return Status::Ok();
}

}  // namespace tandem::models
