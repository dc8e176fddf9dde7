// ProjectionStaging (qwen3_weights_internal.h): one layer's bf16 projections at a time, a
// MoE layer's routed experts with them; the names it stages and the layer-grouped read order
// of a staged load. Thread-compatible, as declared there.
#include <algorithm>
#include <array>
#include <charconv>
#include <tuple>
#include <utility>

#include "models/qwen3/qwen3_weights_internal.h"

namespace tandem::models {

using kernels::DType;
using kernels::TensorView;

namespace {

constexpr int64_t kAlign = 256;  // bytes: each staged tensor starts aligned

int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Parses a non-negative decimal at the front of `s`; advances `s` past it.
std::optional<int64_t> ParseIndex(std::string_view* s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || end == s->data() || v < 0) return std::nullopt;
  s->remove_prefix(static_cast<size_t>(end - s->data()));
  return v;
}

// Element counts of a layer's staged tensors, in buffer order: q, k, v, o, then gate|up and
// down (a dense MLP's [2I, H] and [H, I], or a MoE layer's [E, 2I, H] and [E, H, I]).
std::array<int64_t, 6> StagedElems(const TransformerConfig& c, int64_t layer) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim();
  const bool moe = c.IsMoeLayer(layer);
  const int64_t e = moe ? c.moe->num_experts : 1;
  const int64_t ff = moe ? c.moe->moe_intermediate_size : c.intermediate_size;
  return {q * h, kv * h, kv * h, h * q, e * 2 * ff * h, e * h * ff};
}

}  // namespace

std::optional<ProjectionName> ParseProjectionName(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  ProjectionName p;
  const std::optional<int64_t> layer = ParseIndex(&name);
  if (!layer) return std::nullopt;
  p.layer = *layer;
  static constexpr std::string_view kSuffixes[kProjectionsPerLayer] = {
      ".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight",
      ".self_attn.o_proj.weight", ".mlp.gate_proj.weight",    ".mlp.up_proj.weight",
      ".mlp.down_proj.weight"};
  for (int k = 0; k < kProjectionsPerLayer; ++k) {
    if (name == kSuffixes[k]) {
      p.kind = k;
      return p;
    }
  }
  constexpr std::string_view kExperts = ".mlp.experts.";
  if (!name.starts_with(kExperts)) return std::nullopt;
  name.remove_prefix(kExperts.size());
  if (name == "gate_up_proj" || name == "down_proj") {
    p.kind = name == "gate_up_proj" ? kFusedGateUp : kFusedDown;
    return p;
  }
  const std::optional<int64_t> expert = ParseIndex(&name);
  if (!expert) return std::nullopt;
  p.expert = *expert;
  static constexpr std::string_view kExpertSuffixes[3] = {
      ".gate_proj.weight", ".up_proj.weight", ".down_proj.weight"};
  for (int k = 0; k < 3; ++k) {
    if (name == kExpertSuffixes[k]) {
      p.kind = kExpertGate + k;
      return p;
    }
  }
  return std::nullopt;
}

std::vector<size_t> LayerGroupedOrder(const SafetensorsReader& reader) {
  const std::vector<TensorInfo>& all = reader.tensors();  // by (file, offset)
  // Each tensor's place: its offset, or for a staged one its layer's first offset in the file.
  std::map<std::pair<int, int64_t>, int64_t> first;  // (file, layer) -> offset
  std::vector<int64_t> place(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const std::optional<ProjectionName> p = ParseProjectionName(all[i].name);
    place[i] = p ? first.try_emplace({all[i].file_index, p->layer}, all[i].begin).first->second
                 : all[i].begin;
  }
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(all[a].file_index, place[a]) < std::tie(all[b].file_index, place[b]);
  });
  return order;
}

int64_t ProjectionStaging::LayerBytes(const TransformerConfig& config, int64_t layer) {
  int64_t total = 0;
  for (int64_t elems : StagedElems(config, layer)) total += AlignUp(elems * 2);
  return total;
}

int64_t ProjectionStaging::MaxLayerBytes(const TransformerConfig& config) {
  int64_t most = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    most = std::max(most, LayerBytes(config, l));
  return most;
}

int ProjectionStaging::TensorsPerLayer(int64_t layer) const {
  if (!config_.IsMoeLayer(layer)) return kProjectionsPerLayer;
  const int64_t experts = layout_ == ExpertLayout::kFused ? 2 : 3 * config_.moe->num_experts;
  return kAttentionProjections + static_cast<int>(experts);
}

int ProjectionStaging::TensorIndex(const ProjectionName& p) const {
  if (p.kind < kAttentionProjections) return p.kind;
  const bool moe = config_.IsMoeLayer(p.layer);
  if (p.kind < kProjectionsPerLayer) return moe ? -1 : p.kind;
  if (!moe) return -1;
  if (p.kind >= kFusedGateUp)
    return layout_ == ExpertLayout::kFused ? kAttentionProjections + (p.kind - kFusedGateUp) : -1;
  if (layout_ != ExpertLayout::kPerExpert) return -1;
  return kAttentionProjections + static_cast<int>(3 * p.expert) + (p.kind - kExpertGate);
}

std::string ProjectionStaging::TensorName(int64_t layer, int index) const {
  static constexpr const char* kNames[kProjectionsPerLayer] = {
      "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
      "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
      "mlp.down_proj.weight"};
  if (index < kAttentionProjections || !config_.IsMoeLayer(layer))
    return fmt::format("model.layers.{}.{}", layer, kNames[index]);
  const int x = index - kAttentionProjections;
  if (layout_ == ExpertLayout::kFused)
    return fmt::format("model.layers.{}.mlp.experts.{}", layer,
                       x == 0 ? "gate_up_proj" : "down_proj");
  static constexpr const char* kExpertNames[3] = {"gate_proj", "up_proj", "down_proj"};
  return fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", layer, x / 3, kExpertNames[x % 3]);
}

Status ProjectionStaging::AllocateSlot(int64_t layer, Slot& slot) {
  const std::array<int64_t, 6> elems = StagedElems(config_, layer);
  int64_t offsets[6], total = 0;
  for (int i = 0; i < 6; ++i) {
    offsets[i] = total;
    total += AlignUp(elems[i] * 2);
  }
  ASSIGN_OR_RETURN(slot.buffer, kernels::Tensor::Empty(alloc_, DType::kU8, {total}, stream_));
  char* base = static_cast<char*>(slot.buffer.data());
  auto view = [&](int i, kernels::Shape shape) {
    return TensorView(base + offsets[i], DType::kBF16, shape, device_);
  };
  const int64_t h = config_.hidden_size, q = config_.q_dim(), kv = config_.kv_dim();
  Qwen3LayerWeights& v = slot.views;
  v.q_proj = view(0, {q, h});
  v.k_proj = view(1, {kv, h});
  v.v_proj = view(2, {kv, h});
  v.o_proj = view(3, {h, q});
  if (config_.IsMoeLayer(layer)) {
    const int64_t e = config_.moe->num_experts, i = config_.moe->moe_intermediate_size;
    v.moe.experts = {view(4, {e, 2 * i, h}), view(5, {e, h, i})};
  } else {
    const int64_t ff = config_.intermediate_size;
    v.gate_up = view(4, {2 * ff, h});  // gate rows, then up rows: one [2I, H] matrix
    v.down_proj = view(5, {h, ff});
  }
  slot.arrived.assign(static_cast<size_t>(TensorsPerLayer(layer)), false);
  return Status::Ok();
}

TensorView ProjectionStaging::View(const Slot& slot, int64_t layer, int index) const {
  const Qwen3LayerWeights& v = slot.views;
  const TensorView attention[kAttentionProjections] = {v.q_proj, v.k_proj, v.v_proj, v.o_proj};
  if (index < kAttentionProjections) return attention[index];
  const int x = index - kAttentionProjections;
  if (!config_.IsMoeLayer(layer)) {
    const int64_t ff = config_.intermediate_size;
    return x == 2 ? v.down_proj : v.gate_up.Narrow(0, x == 0 ? 0 : ff, ff);
  }
  const kernels::MoeExpertWeights& m = v.moe.experts;
  if (layout_ == ExpertLayout::kFused) return x == 0 ? m.gate_up : m.down;
  const int64_t e = x / 3, i = m.down.dim(2), h = m.down.dim(1);
  if (x % 3 == 2) return m.down.Narrow(0, e, 1).Reshape({h, i});
  return m.gate_up.Narrow(0, e, 1).Reshape({2 * i, h}).Narrow(0, x % 3 == 0 ? 0 : i, i);
}

Result<TensorView> ProjectionStaging::Destination(const ProjectionName& p) {
  if (p.layer < 0 || p.layer >= config_.num_hidden_layers)
    return InvalidArgumentError("model.layers.{}: the config has {} layers", p.layer,
                                config_.num_hidden_layers);
  const bool expert = p.kind >= kExpertGate && p.kind <= kExpertDown;
  if (expert && config_.IsMoeLayer(p.layer) && p.expert >= config_.moe->num_experts)
    return DataLossError("model.layers.{}.mlp.experts.{}: the config has {} experts", p.layer,
                         p.expert, config_.moe->num_experts);
  const int index = TensorIndex(p);
  if (index < 0) return TensorView();  // not staged in this layer and layout
  Slot& slot = slots_[p.layer];
  if (slot.done)
    return DataLossError("{}: arrived after its layer was complete (duplicate tensor?)",
                         TensorName(p.layer, index));
  if (slot.buffer.empty()) RETURN_IF_ERROR(AllocateSlot(p.layer, slot));
  if (slot.arrived[static_cast<size_t>(index)])
    return DataLossError("{}: arrived twice (duplicate tensor?)", TensorName(p.layer, index));
  return View(slot, p.layer, index);
}

Status ProjectionStaging::Arrived(const ProjectionName& p) {
  Slot& slot = slots_.at(p.layer);
  const int index = TensorIndex(p);
  if (index < 0 || slot.done || slot.arrived[static_cast<size_t>(index)])
    return DataLossError("{}: arrived twice or unexpected (duplicate tensor?)",
                         index < 0 ? fmt::format("model.layers.{}", p.layer)
                                   : TensorName(p.layer, index));
  slot.arrived[static_cast<size_t>(index)] = true;
  if (++slot.count < TensorsPerLayer(p.layer)) return Status::Ok();
  RETURN_IF_ERROR(sink_(p.layer, slot.views, stream_)
                      .WithContext(fmt::format("model.layers.{} projections", p.layer)));
  slot.done = true;
  slot.buffer = kernels::Tensor();  // back to the pool, ordered after the sink's work
  slot.views = Qwen3LayerWeights();
  slot.arrived.clear();
  return Status::Ok();
}

int64_t ProjectionStaging::ExpectedTensors() const {
  int64_t n = 0;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) n += TensorsPerLayer(l);
  return n;
}

Status ProjectionStaging::CheckComplete() const {
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    auto it = slots_.find(l);
    if (it != slots_.end() && it->second.done) continue;
    int missing = 0;
    if (it != slots_.end())
      while (missing < static_cast<int>(it->second.arrived.size()) &&
             it->second.arrived[static_cast<size_t>(missing)])
        ++missing;
    return DataLossError("model.layers.{}: {} of its {} projection weights were read ('{}' "
                         "is missing)", l, it == slots_.end() ? 0 : it->second.count,
                         TensorsPerLayer(l), TensorName(l, missing));
  }
  return Status::Ok();
}

}  // namespace tandem::models
