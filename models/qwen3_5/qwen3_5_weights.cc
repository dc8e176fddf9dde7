#include "models/qwen3_5/qwen3_5_weights.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "kernels/elementwise/elementwise.h"
#include "kernels/random/philox.h"
#include "models/io/fp8_checkpoint.h"
#include "models/io/hf_config.h"

namespace tandem::models {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::Shape;
using kernels::Stream;
using kernels::Tensor;
using kernels::TensorView;

namespace {

constexpr int64_t kParamAlignment = 256;  // bytes; keeps every GEMM operand 16-byte aligned

// A checkpoint tensor and where it goes: `packed` tensors sit directly after the previous
// one, so consecutive rows form one matrix (one GEMM). Projections (a layer's matrices) go
// to an allocation of their own, which ReleaseProjections frees.
struct Placed {
  WeightSpec spec;
  bool packed = false;
  bool projection = false;
};

// A layer's matrices that have an FP8 form (qwen3_5_fp8.h): every 2-d weight of a layer but
// a MoE block's router and shared-expert gate (which stay bf16), and a MoE layer's experts in
// either layout (transformers 5's fused tensors are 3-d).
bool IsProjection(const WeightSpec& s) {
  if (s.name.find(".layers.") == std::string::npos) return false;
  if (s.name.ends_with(".mlp.gate.weight") || s.name.ends_with(".mlp.shared_expert_gate.weight"))
    return false;
  return s.shape.size() == 2 || s.name.find(".mlp.experts.") != std::string::npos;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A MoE layer's feed-forward tensors (`l`: the layer's name prefix): the router, the experts
// in `experts` (per expert: every gate|up pair, then every down_proj, each directly after
// the one before, so they form one [E, 2I, H] and one [E, H, I] matrix as the fused tensors
// do), the shared expert (gate|up packed) and its gate.
void AddMoe(const Qwen35Config& c, const std::string& l, ExpertLayout experts,
            const std::function<void(std::string, std::vector<int64_t>, bool)>& add) {
  std::vector<WeightSpec> moe;
  AppendMoeExpertSpecs(l, c.hidden_size, *c.moe, experts, &moe);
  std::stable_partition(moe.begin(), moe.end(), [](const WeightSpec& s) {
    return !s.name.ends_with(".down_proj.weight");
  });
  for (WeightSpec& s : moe) {
    const bool per_expert = s.name.find(".mlp.experts.") != std::string::npos &&
                            s.name.ends_with(".weight");
    const bool first = s.name.find(".experts.0.") != std::string::npos &&
                       !s.name.ends_with(".up_proj.weight");
    add(std::move(s.name), std::move(s.shape), per_expert && !first);
  }
  const int64_t h = c.hidden_size, is = c.moe->shared_expert_intermediate_size;
  add(l + "mlp.shared_expert.gate_proj.weight", {is, h}, false);
  add(l + "mlp.shared_expert.up_proj.weight", {is, h}, true);
  add(l + "mlp.shared_expert.down_proj.weight", {h, is}, false);
  add(l + "mlp.shared_expert_gate.weight", {1, h}, false);
}

std::vector<Placed> Layout(const Qwen35Config& c, ExpertLayout experts = ExpertLayout::kFused) {
  const int64_t h = c.hidden_size, ff = c.intermediate_size, hv = c.linear_num_value_heads;
  std::vector<Placed> out;
  auto add = [&](std::string name, std::vector<int64_t> shape, bool packed = false) {
    WeightSpec spec{std::move(name), std::move(shape)};
    const bool projection = IsProjection(spec);
    out.push_back({std::move(spec), packed, projection});
  };
  const std::string& p = c.weight_prefix;
  add(p + "embed_tokens.weight", {c.vocab_size, h});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = fmt::format("{}layers.{}.", p, i);
    add(l + "input_layernorm.weight", {h});
    if (c.layer_types[i] == HybridLayerType::kLinearAttention) {
      const std::string a = l + "linear_attn.";
      add(a + "in_proj_qkv.weight", {c.conv_dim(), h});
      add(a + "in_proj_z.weight", {c.linear_value_dim(), h}, true);
      add(a + "in_proj_b.weight", {hv, h}, true);
      add(a + "in_proj_a.weight", {hv, h}, true);
      add(a + "conv1d.weight", {c.conv_dim(), 1, c.linear_conv_kernel_dim});
      add(a + "A_log", {hv});
      add(a + "dt_bias", {hv});
      add(a + "norm.weight", {c.linear_value_head_dim});
      add(a + "out_proj.weight", {h, c.linear_value_dim()});
    } else {
      const std::string a = l + "self_attn.";
      add(a + "q_proj.weight", {2 * c.q_dim(), h});
      add(a + "k_proj.weight", {c.kv_dim(), h});
      add(a + "v_proj.weight", {c.kv_dim(), h});
      add(a + "q_norm.weight", {c.head_dim});
      add(a + "k_norm.weight", {c.head_dim});
      add(a + "o_proj.weight", {h, c.q_dim()});
    }
    add(l + "post_attention_layernorm.weight", {h});
    if (c.moe) {
      AddMoe(c, l, experts, add);
      continue;
    }
    add(l + "mlp.gate_proj.weight", {ff, h});
    add(l + "mlp.up_proj.weight", {ff, h}, true);
    add(l + "mlp.down_proj.weight", {h, ff});
  }
  add(p + "norm.weight", {h});
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, h});
  return out;
}

// A view of `rows` rows starting at `first` (packed members follow it in memory).
TensorView Block(const TensorView& first, int64_t rows, int64_t cols) {
  if (first.empty()) return TensorView();
  return TensorView(first.data(), DType::kBF16, {rows, cols}, first.device());
}

// `first` (an empty view stays empty) as the start of a bf16 tensor of `shape`.
TensorView Shaped(const TensorView& first, Shape shape) {
  if (first.empty()) return TensorView();
  return TensorView(first.data(), DType::kBF16, shape, first.device());
}

// A MoE layer's block views (`l`: the layer's name prefix), for either expert layout.
kernels::MoeLayerWeights MoeViews(const Qwen35Config& c, const std::string& l,
                                  const std::function<TensorView(const std::string&)>& at) {
  const int64_t h = c.hidden_size, e = c.moe->num_experts, i = c.moe->moe_intermediate_size;
  TensorView gate_up = at(l + "mlp.experts.gate_up_proj"), down = at(l + "mlp.experts.down_proj");
  if (gate_up.empty()) gate_up = at(l + "mlp.experts.0.gate_proj.weight");  // per expert
  if (down.empty()) down = at(l + "mlp.experts.0.down_proj.weight");
  kernels::MoeLayerWeights m;
  m.router = at(l + "mlp.gate.weight");
  m.experts = {Shaped(gate_up, {e, 2 * i, h}), Shaped(down, {e, h, i})};
  m.shared_gate_up = Block(at(l + "mlp.shared_expert.gate_proj.weight"),
                           2 * c.moe->shared_expert_intermediate_size, h);
  m.shared_down = at(l + "mlp.shared_expert.down_proj.weight");
  m.shared_gate = at(l + "mlp.shared_expert_gate.weight");
  return m;
}

// Layer i's views by HF name (`at` gives an empty view for a name it does not hold).
Qwen35LayerWeights LayerViews(const Qwen35Config& c, int64_t i,
                              const std::function<TensorView(const std::string&)>& at) {
  const std::string l = fmt::format("{}layers.{}.", c.weight_prefix, i);
  const int64_t h = c.hidden_size, hv = c.linear_num_value_heads;
  Qwen35LayerWeights lw;
  lw.type = c.layer_types[i];
  lw.input_norm = at(l + "input_layernorm.weight");
  lw.post_norm = at(l + "post_attention_layernorm.weight");
  if (lw.type == HybridLayerType::kLinearAttention) {
    const std::string a = l + "linear_attn.";
    Qwen35LinearAttentionWeights& la = lw.linear;
    la.in_proj =
        Block(at(a + "in_proj_qkv.weight"), c.conv_dim() + c.linear_value_dim() + 2 * hv, h);
    la.conv1d = Block(at(a + "conv1d.weight"), c.conv_dim(), c.linear_conv_kernel_dim);
    la.a_log = at(a + "A_log");
    la.dt_bias = at(a + "dt_bias");
    la.norm = at(a + "norm.weight");
    la.out_proj = at(a + "out_proj.weight");
  } else {
    const std::string a = l + "self_attn.";
    lw.attn = {at(a + "q_proj.weight"), at(a + "k_proj.weight"), at(a + "v_proj.weight"),
               at(a + "q_norm.weight"), at(a + "k_norm.weight"), at(a + "o_proj.weight")};
  }
  if (c.moe) {
    lw.moe = MoeViews(c, l, at);
    return lw;
  }
  lw.gate_up = Block(at(l + "mlp.gate_proj.weight"), 2 * c.intermediate_size, h);
  lw.down_proj = at(l + "mlp.down_proj.weight");
  return lw;
}

// The layer a projection's name belongs to ("<prefix>layers.<i>.").
int64_t LayerOf(const std::string& name, const std::string& prefix) {
  const size_t at = prefix.size() + 7;  // after "layers."
  return std::stoll(name.substr(at, name.find('.', at) - at));
}

// Offsets of `layout`'s entries selected by `pick` (packed members directly after the one
// before them, the others 256-byte aligned); returns the total bytes (at least 1).
int64_t PackOffsets(const std::vector<Placed>& layout,
                    const std::function<bool(const Placed&)>& pick,
                    std::vector<int64_t>* offsets) {
  int64_t total = 0;
  for (const Placed& p : layout) {
    if (!pick(p)) continue;
    if (!p.packed) total = (total + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
    offsets->push_back(total);
    total += Numel(p.spec.shape) * 2;
  }
  return std::max<int64_t>(total, 1);
}

// One staging buffer per layer whose projections are being read or drawn: allocated on the
// layer's first projection, handed to the sink once all have arrived, then freed (stream-
// ordered: the sink's work on the stream may still read it).
class LayerStaging {
 public:
  LayerStaging(const Qwen35Config& c, kernels::Allocator& alloc, const Qwen35ProjectionSink& sink,
               Stream stream, const std::vector<Placed>& layout)
      : c_(c), alloc_(alloc), sink_(sink), stream_(stream), layout_(layout) {}

  Result<TensorView> Destination(const std::string& name) {
    const int64_t layer = LayerOf(name, c_.weight_prefix);
    Slot& slot = slots_[layer];
    if (slot.views.empty()) {
      const std::string l = fmt::format("{}layers.{}.", c_.weight_prefix, layer);
      std::vector<int64_t> offsets;
      auto mine = [&](const Placed& p) { return p.projection && p.spec.name.starts_with(l); };
      const int64_t total = PackOffsets(layout_, mine, &offsets);
      ASSIGN_OR_RETURN(slot.buffer, Tensor::Empty(alloc_, DType::kU8, {total}, stream_));
      size_t k = 0;
      for (const Placed& p : layout_) {
        if (!mine(p)) continue;
        slot.views[p.spec.name] =
            TensorView(static_cast<char*>(slot.buffer.data()) + offsets[k++], DType::kBF16,
                       Shape::FromArray(p.spec.shape.data(), static_cast<int>(p.spec.shape.size())),
                       alloc_.device());
      }
    }
    return slot.views.at(name);
  }

  Status Arrived(const std::string& name) {
    const int64_t layer = LayerOf(name, c_.weight_prefix);
    Slot& slot = slots_[layer];
    if (++slot.arrived < static_cast<int>(slot.views.size())) return Status::Ok();
    const Qwen35LayerWeights staged = LayerViews(c_, layer, [&](const std::string& n) {
      auto it = slot.views.find(n);
      return it == slot.views.end() ? TensorView() : it->second;
    });
    RETURN_IF_ERROR(sink_(layer, staged, stream_));
    slots_.erase(layer);
    ++done_;
    return Status::Ok();
  }

  Status CheckComplete() const {
    if (done_ == c_.num_hidden_layers) return Status::Ok();
    return DataLossError("Qwen35Weights: {} of {} layers' projections were complete", done_,
                         c_.num_hidden_layers);
  }

 private:
  struct Slot {
    Tensor buffer;
    std::map<std::string, TensorView> views;
    int arrived = 0;
  };
  const Qwen35Config& c_;
  kernels::Allocator& alloc_;
  const Qwen35ProjectionSink& sink_;
  Stream stream_;
  const std::vector<Placed>& layout_;
  std::map<int64_t, Slot> slots_;
  int64_t done_ = 0;
};

// f32 scratch elements per random fill.
constexpr int64_t kRandomChunk = int64_t{1} << 22;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(),
                                                suffix) == 0;
}

// Fills `dst` (bf16) with tensor `s`'s random values (Qwen35Weights::Random's ranges):
// Philox stream `seed`, offset (index << 20) + chunk for each chunk of `scratch`.
Status FillRandom(const WeightSpec& s, size_t index, TensorView dst, uint64_t seed, float scale,
                  float head_bound, const Tensor& scratch, Stream stream) {
  dst = dst.Reshape({Numel(s.shape)});
  float lo = 0.f, hi = 0.f;
  if (EndsWith(s.name, "A_log") || EndsWith(s.name, "dt_bias")) {
    hi = 1.f;
  } else if (EndsWith(s.name, "linear_attn.norm.weight")) {
    lo = 0.8f;
    hi = 1.2f;
  } else if (s.shape.size() == 1) {
    lo = -0.1f;  // zero-centred: the norm multiplies by 1 + w
    hi = 0.1f;
  } else if (EndsWith(s.name, "embed_tokens.weight") || s.name == "lm_head.weight") {
    lo = -head_bound;
    hi = head_bound;
  } else {
    hi = scale / std::sqrt(static_cast<float>(s.shape.back()));
    lo = -hi;
  }
  const int64_t chunk_elems = scratch.numel();
  for (int64_t off = 0, chunk = 0; off < dst.numel(); off += chunk_elems, ++chunk) {
    const int64_t n = std::min(chunk_elems, dst.numel() - off);
    const TensorView part = scratch.view().Narrow(0, 0, n);
    RETURN_IF_ERROR(kernels::PhiloxUniformFill(part, lo, hi, seed, (index << 20) + chunk, stream));
    RETURN_IF_ERROR(kernels::Cast(dst.Narrow(0, off, n), part, stream));
  }
  return Status::Ok();
}

}  // namespace

std::vector<WeightSpec> Qwen35WeightSpecs(const Qwen35Config& c, ExpertLayout layout) {
  std::vector<WeightSpec> specs;
  for (Placed& p : Layout(c, layout)) specs.push_back(std::move(p.spec));
  return specs;
}

Result<Qwen35Weights> Qwen35Weights::Allocate(const Qwen35Config& c, kernels::Allocator& alloc,
                                              Stream stream, bool with_projections,
                                              ExpertLayout experts) {
  const Device device = alloc.device();
  const std::vector<Placed> layout = Layout(c, experts);
  Qwen35Weights w;
  w.config_ = c;
  w.allocator_ = &alloc;
  for (const bool projections : {false, true}) {  // the rest, then the projections
    if (projections && !with_projections) break;
    std::vector<int64_t> offsets;
    auto pick = [&](const Placed& p) { return p.projection == projections; };
    const int64_t total = PackOffsets(layout, pick, &offsets);
    Tensor& storage = projections ? w.projections_ : w.storage_;
    ASSIGN_OR_RETURN(storage, Tensor::Empty(alloc, DType::kU8, {total}, stream));
    size_t k = 0;
    for (const Placed& p : layout) {
      if (!pick(p)) continue;
      w.by_name_[p.spec.name] =
          TensorView(static_cast<char*>(storage.data()) + offsets[k++], DType::kBF16,
                     Shape::FromArray(p.spec.shape.data(), static_cast<int>(p.spec.shape.size())),
                     device);
    }
  }
  auto at = [&](const std::string& name) { return w.Destination(name); };
  const std::string& p = c.weight_prefix;
  w.embed_ = at(p + "embed_tokens.weight");
  w.final_norm_ = at(p + "norm.weight");
  w.lm_head_ = c.tie_word_embeddings ? w.embed_ : at("lm_head.weight");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) w.layers_.push_back(LayerViews(c, i, at));
  return w;
}

Qwen35Weights Qwen35Weights::Alias() const {
  Qwen35Weights w;
  w.config_ = config_;
  w.embed_ = embed_;
  w.final_norm_ = final_norm_;
  w.lm_head_ = lm_head_;
  w.layers_ = layers_;
  w.allocator_ = allocator_;
  return w;
}

Status Qwen35Weights::ReleaseProjections(Stream stream) {
  if (!has_projections()) return Status::Ok();
  // Whatever was enqueued on `stream` (e.g. quantizing them) reads them before they go.
  RETURN_IF_ERROR(kernels::SynchronizeStream(device(), stream));
  for (Qwen35LayerWeights& l : layers_) {
    for (TensorView* v : {&l.linear.in_proj, &l.linear.out_proj, &l.attn.q_proj, &l.attn.k_proj,
                          &l.attn.v_proj, &l.attn.o_proj, &l.gate_up, &l.down_proj,
                          &l.moe.experts.gate_up, &l.moe.experts.down, &l.moe.shared_gate_up,
                          &l.moe.shared_down})
      *v = TensorView();
  }
  for (const ExpertLayout layout : {ExpertLayout::kFused, ExpertLayout::kPerExpert})
    for (const WeightSpec& s : Qwen35WeightSpecs(config_, layout))
      if (IsProjection(s)) by_name_.erase(s.name);
  projections_ = Tensor();
  return Status::Ok();
}

TensorView Qwen35Weights::Destination(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? TensorView() : it->second;
}

Result<Qwen35Weights> Qwen35Weights::Load(const Qwen35Config& config,
                                          const SafetensorsReader& reader,
                                          kernels::Allocator& alloc, Stream stream,
                                          const Qwen35ProjectionSink& sink) {
  const Device device = alloc.device();
  ExpertLayout experts = ExpertLayout::kFused;
  if (config.moe) {
    std::vector<std::string> moe_layers;
    for (int64_t i = 0; i < config.num_hidden_layers; ++i)
      moe_layers.push_back(fmt::format("{}layers.{}.", config.weight_prefix, i));
    ASSIGN_OR_RETURN(experts, DetectExpertLayout(reader, moe_layers, config.moe->num_experts));
  }
  const std::vector<WeightSpec> specs = Qwen35WeightSpecs(config, experts);
  RETURN_IF_ERROR(CheckWeights(reader, specs, config.fp8_block_weights));
  ASSIGN_OR_RETURN(Qwen35Weights w, Allocate(config, alloc, stream, !sink, experts));
  const std::vector<Placed> layout = Layout(config, experts);
  std::map<std::string, bool> projection;  // the names the sink takes
  if (sink)
    for (const Placed& p : layout) projection[p.spec.name] = p.projection;
  LayerStaging layers(config, alloc, sink, stream, layout);
  std::vector<bf16> staging;  // converted fp32/fp16 tensors
  int64_t loaded = 0;
  RETURN_IF_ERROR(reader.ForEachInFileOrder(
      [&](const TensorInfo& t, std::span<const std::byte> bytes) -> Status {
        const auto staged = projection.find(t.name);
        const bool to_sink = staged != projection.end() && staged->second;
        TensorView dst = w.Destination(t.name);
        if (to_sink) {
          ASSIGN_OR_RETURN(dst, layers.Destination(t.name));
        }
        if (dst.empty()) return Status::Ok();  // vision tower, MTP head, caches
        const void* src = bytes.data();
        if (t.dtype == DType::kF8E4M3) {  // checked by CheckWeights: has its 128x128 scales
          staging.resize(static_cast<size_t>(dst.numel()));
          RETURN_IF_ERROR(DequantizeFp8BlockWeight(reader, t, bytes, staging));
          src = staging.data();
        } else if (t.dtype != DType::kBF16) {
          // A pageable copy returns once the source is consumed: one staging buffer serves all.
          staging.resize(static_cast<size_t>(dst.numel()));
          if (!ConvertElements(t.dtype, bytes.data(), DType::kBF16, staging.data(), dst.numel()))
            return DataLossError("{}: cannot convert {} to bf16", reader.Where(t),
                                 SafetensorsDTypeName(t.dtype));
          src = staging.data();
        }
        RETURN_IF_ERROR(kernels::CopyFromHost(dst, src, stream));
        ++loaded;
        return to_sink ? layers.Arrived(t.name) : Status::Ok();
      }));
  if (sink) RETURN_IF_ERROR(layers.CheckComplete());
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  const int64_t expected = static_cast<int64_t>(specs.size());
  if (loaded != expected)
    return DataLossError("{}: loaded {} of the {} weights the config needs (duplicate names?)",
                         reader.files().empty() ? "" : reader.files().front(), loaded, expected);
  return w;
}

Result<Qwen35Weights> Qwen35Weights::Random(const Qwen35Config& config,
                                            kernels::Allocator& alloc, uint64_t seed,
                                            Stream stream, float scale,
                                            const Qwen35ProjectionSink& sink) {
  const Device device = alloc.device();
  ASSIGN_OR_RETURN(Qwen35Weights w, Allocate(config, alloc, stream, !sink));
  ASSIGN_OR_RETURN(Tensor scratch, Tensor::Empty(alloc, DType::kF32, {kRandomChunk}, stream));
  const std::vector<Placed> layout = Layout(config);
  LayerStaging layers(config, alloc, sink, stream, layout);
  for (size_t i = 0; i < layout.size(); ++i) {
    const WeightSpec& s = layout[i].spec;
    const bool to_sink = sink && layout[i].projection;
    TensorView dst = w.Destination(s.name);
    if (to_sink) {
      ASSIGN_OR_RETURN(dst, layers.Destination(s.name));
    }
    RETURN_IF_ERROR(FillRandom(s, i, dst, seed, scale,
                               RandomHeadBound(config.initializer_range, scale), scratch, stream));
    if (to_sink) RETURN_IF_ERROR(layers.Arrived(s.name));
  }
  if (sink) RETURN_IF_ERROR(layers.CheckComplete());
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  return w;
}

namespace {

// The head's tensors (one when tied) and their indices in Qwen35WeightSpecs.
std::vector<std::pair<size_t, WeightSpec>> HeadSpecs(const Qwen35Config& c) {
  std::vector<std::pair<size_t, WeightSpec>> out;
  const std::vector<WeightSpec> all = Qwen35WeightSpecs(c);
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name == c.weight_prefix + "embed_tokens.weight" || all[i].name == "lm_head.weight")
      out.emplace_back(i, all[i]);
  return out;
}

}  // namespace

Result<Qwen35Head> Qwen35Head::Allocate(const Qwen35Config& c, kernels::Allocator& alloc,
                                        Stream stream) {
  const Device device = alloc.device();
  const int64_t v = c.vocab_size, h = c.hidden_size;
  Qwen35Head head;
  ASSIGN_OR_RETURN(head.storage_, Tensor::Empty(alloc, DType::kBF16,
                                                {c.tie_word_embeddings ? 1 : 2, v, h}, stream));
  auto* base = static_cast<bf16*>(head.storage_.data());
  head.embed_ = TensorView(base, DType::kBF16, {v, h}, device);
  head.lm_head_ = c.tie_word_embeddings ? head.embed_
                                        : TensorView(base + v * h, DType::kBF16, {v, h}, device);
  return head;
}

Result<Qwen35Head> Qwen35Head::Load(const std::string& dir, const Qwen35Config& config,
                                    kernels::Allocator& alloc, Stream stream) {
  const Device device = alloc.device();
  ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(dir));
  std::vector<WeightSpec> specs;
  for (auto& [index, spec] : HeadSpecs(config)) specs.push_back(spec);
  RETURN_IF_ERROR(CheckWeights(reader, specs));
  ASSIGN_OR_RETURN(Qwen35Head head, Allocate(config, alloc, stream));
  std::vector<bf16> staging(static_cast<size_t>(head.embed_.numel()));
  for (const WeightSpec& s : specs) {
    const TensorView dst = s.name == "lm_head.weight" ? head.lm_head_ : head.embed_;
    RETURN_IF_ERROR(reader.Read(s.name, DType::kBF16, staging.data(), dst.nbytes()));
    RETURN_IF_ERROR(kernels::CopyFromHost(dst, staging.data(), stream));
    // The staging buffer is reused: wait until this copy has read it.
    RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  }
  return head;
}

Result<Qwen35Head> Qwen35Head::Random(const Qwen35Config& config, kernels::Allocator& alloc,
                                      uint64_t seed, Stream stream, float scale) {
  const Device device = alloc.device();
  ASSIGN_OR_RETURN(Qwen35Head head, Allocate(config, alloc, stream));
  ASSIGN_OR_RETURN(Tensor scratch, Tensor::Empty(alloc, DType::kF32, {kRandomChunk}, stream));
  for (auto& [index, spec] : HeadSpecs(config)) {
    const TensorView dst = spec.name == "lm_head.weight" ? head.lm_head_ : head.embed_;
    RETURN_IF_ERROR(FillRandom(spec, index, dst, seed, scale,
                               RandomHeadBound(config.initializer_range, scale), scratch, stream));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  return head;
}

}  // namespace tandem::models
