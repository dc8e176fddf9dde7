#include "models/qwen3/qwen3_weights.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "kernels/elementwise/elementwise.h"
#include "kernels/random/philox.h"
#include "models/io/fp8_checkpoint.h"
#include "models/io/weight_spec.h"
#include "models/qwen3/qwen3_weights_internal.h"

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

int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape ToShape(const std::vector<int64_t>& dims) {
  return Shape::FromArray(dims.data(), static_cast<int>(dims.size()));
}

constexpr std::string_view kExperts = ".mlp.experts.";

// The view a checkpoint expert tensor `name` of layer blocks `moe` fills (either layout).
TensorView ExpertView(const std::string& name, const kernels::MoeExpertWeights& moe) {
  const std::string_view rest =
      std::string_view(name).substr(name.find(kExperts) + kExperts.size());
  if (rest == "gate_up_proj") return moe.gate_up;
  if (rest == "down_proj") return moe.down;
  int64_t x = 0;
  const size_t dot = rest.find('.');
  for (char ch : rest.substr(0, dot)) x = x * 10 + (ch - '0');
  const std::string_view proj = rest.substr(dot + 1);
  const int64_t i = moe.down.dim(2), h = moe.down.dim(1);
  if (proj == "down_proj.weight")
    return moe.down.Narrow(0, x, 1).Reshape({h, i});
  const TensorView gu = moe.gate_up.Narrow(0, x, 1).Reshape({2 * i, h});
  return gu.Narrow(0, proj == "gate_proj.weight" ? 0 : i, i);
}

}  // namespace

Status FillRandomWeight(const WeightSpec& s, size_t index, TensorView dst, uint64_t seed,
                        float scale, float head_bound, const Tensor& scratch, Stream stream) {
  dst = dst.Reshape({Numel(s.shape)});
  float lo, hi;
  if (s.shape.size() == 1) {
    lo = 0.8f;
    hi = 1.2f;
  } else if (EndsWith(s.name, "embed_tokens.weight") || EndsWith(s.name, "lm_head.weight")) {
    lo = -head_bound;
    hi = head_bound;
  } else {
    hi = scale / std::sqrt(static_cast<float>(s.shape[1]));
    lo = -hi;
  }
  const int64_t chunk_elems = scratch.numel();
  for (int64_t off = 0, chunk = 0; off < dst.numel(); off += chunk_elems, ++chunk) {
    const int64_t n = std::min(chunk_elems, dst.numel() - off);
    const TensorView part = scratch.view().Narrow(0, 0, n);
    RETURN_IF_ERROR(
        kernels::PhiloxUniformFill(part, lo, hi, seed, (index << 20) + chunk, stream));
    RETURN_IF_ERROR(kernels::Cast(dst.Narrow(0, off, n), part, stream));
  }
  return Status::Ok();
}

Result<Qwen3Weights> Qwen3Weights::Allocate(const TransformerConfig& c,
                                            kernels::Allocator& alloc, Stream stream,
                                            bool projections, ExpertLayout layout) {
  const Device device = alloc.device();
  std::vector<WeightSpec> specs = CausalLmWeightSpecs(c, layout);
  if (!projections)
    std::erase_if(specs, [](const WeightSpec& s) { return ParseProjectionName(s.name).has_value(); });
  // Byte offsets: every parameter aligned; up_proj directly after gate_proj (one [2I, H]).
  std::unordered_map<std::string, int64_t> offsets;
  int64_t total = 0;
  std::vector<std::pair<int64_t, int64_t>> expert_offsets;  // per MoE layer: gate_up, down
  for (const WeightSpec& s : specs) {
    const int64_t bytes = Numel(s.shape) * 2;
    if (EndsWith(s.name, "mlp.up_proj.weight")) continue;  // placed with its gate_proj
    if (s.name.find(kExperts) != std::string::npos) continue;  // in the layer's expert blocks
    const int64_t off = AlignUp(total, kParamAlignment);
    offsets[s.name] = off;
    total = off + bytes;
    if (EndsWith(s.name, "mlp.gate_proj.weight")) {
      const std::string up = s.name.substr(0, s.name.size() - 16) + "up_proj.weight";
      offsets[up] = total;
      total += bytes;
    }
    if (projections && EndsWith(s.name, "mlp.gate.weight")) {  // the router: experts follow
      const int64_t e = c.moe->num_experts, i = c.moe->moe_intermediate_size;
      const int64_t gu = AlignUp(total, kParamAlignment);
      const int64_t down = AlignUp(gu + e * 2 * i * c.hidden_size * 2, kParamAlignment);
      expert_offsets.emplace_back(gu, down);
      total = down + e * c.hidden_size * i * 2;
    }
  }
  Qwen3Weights w;
  w.config_ = c;
  w.allocator_ = &alloc;
  ASSIGN_OR_RETURN(w.storage_, Tensor::Empty(alloc, DType::kU8, {std::max<int64_t>(total, 1)},
                                             stream));
  char* base = static_cast<char*>(w.storage_.data());
  std::unordered_map<std::string, TensorView> views;
  std::unordered_map<std::string, kernels::MoeExpertWeights> experts;  // by layer prefix
  size_t moe_layers = 0;
  for (const WeightSpec& s : specs) {
    if (projections && EndsWith(s.name, "mlp.gate.weight")) {
      const int64_t e = c.moe->num_experts, i = c.moe->moe_intermediate_size,
                    h = c.hidden_size;
      const auto [gu, down] = expert_offsets[moe_layers++];
      experts[s.name.substr(0, s.name.size() - 15)] = {
          TensorView(base + gu, DType::kBF16, {e, 2 * i, h}, device),
          TensorView(base + down, DType::kBF16, {e, h, i}, device)};
    }
    if (const size_t at = s.name.find(kExperts); at != std::string::npos) {
      views[s.name] = ExpertView(s.name, experts.at(s.name.substr(0, at + 1)));
      continue;
    }
    views[s.name] = TensorView(base + offsets.at(s.name), DType::kBF16, ToShape(s.shape), device);
  }
  auto at = [&](const std::string& name) {
    auto it = views.find(name);
    return it == views.end() ? TensorView() : it->second;
  };
  w.embed_ = at("model.embed_tokens.weight");
  w.final_norm_ = at("model.norm.weight");
  w.lm_head_ = c.tie_word_embeddings ? w.embed_ : at("lm_head.weight");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    Qwen3LayerWeights l;
    l.input_norm = at(p + "input_layernorm.weight");
    l.q_proj = at(p + "self_attn.q_proj.weight");
    l.k_proj = at(p + "self_attn.k_proj.weight");
    l.v_proj = at(p + "self_attn.v_proj.weight");
    if (c.qk_norm) {
      l.q_norm = at(p + "self_attn.q_norm.weight");
      l.k_norm = at(p + "self_attn.k_norm.weight");
    }
    l.o_proj = at(p + "self_attn.o_proj.weight");
    l.post_norm = at(p + "post_attention_layernorm.weight");
    if (const TensorView gate = at(p + "mlp.gate_proj.weight"); !gate.empty())
      l.gate_up = TensorView(gate.data(), DType::kBF16,
                             {2 * c.intermediate_size, c.hidden_size}, device);
    l.down_proj = at(p + "mlp.down_proj.weight");
    if (c.IsMoeLayer(i)) {
      l.moe.router = at(p + "mlp.gate.weight");
      if (projections) l.moe.experts = experts.at(p);
    }
    w.layers_.push_back(l);
  }
  w.by_name_ = std::move(views);
  return w;
}

Status Qwen3Weights::ReleaseProjections(Stream stream) {
  const Device device = storage_.device();
  std::vector<TensorView*> keep = {&embed_, &final_norm_};
  if (!config_.tie_word_embeddings) keep.push_back(&lm_head_);
  for (Qwen3LayerWeights& l : layers_)
    for (TensorView* v : {&l.input_norm, &l.q_norm, &l.k_norm, &l.post_norm, &l.moe.router})
      if (!v->empty()) keep.push_back(v);
  int64_t total = 0;
  for (const TensorView* v : keep) total = AlignUp(total, kParamAlignment) + v->nbytes();
  ASSIGN_OR_RETURN(Tensor fresh, Tensor::Empty(allocator(), DType::kU8, {std::max<int64_t>(total, 1)},
                                               stream));
  char* base = static_cast<char*>(fresh.data());
  int64_t offset = 0;
  for (TensorView* v : keep) {
    offset = AlignUp(offset, kParamAlignment);
    const TensorView moved(base + offset, v->dtype(), v->shape(), device);
    RETURN_IF_ERROR(kernels::Copy(moved, *v, stream));
    *v = moved;
    offset += v->nbytes();
  }
  if (config_.tie_word_embeddings) lm_head_ = embed_;
  for (Qwen3LayerWeights& l : layers_) {
    l.q_proj = l.k_proj = l.v_proj = l.o_proj = l.gate_up = l.down_proj = TensorView();
    l.moe.experts = kernels::MoeExpertWeights();
  }
  by_name_.clear();  // only Load uses it
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  storage_ = std::move(fresh);
  return Status::Ok();
}

Qwen3Weights Qwen3Weights::Alias() const {
  Qwen3Weights w;
  w.config_ = config_;
  w.embed_ = embed_;
  w.final_norm_ = final_norm_;
  w.lm_head_ = lm_head_;
  w.layers_ = layers_;
  w.allocator_ = allocator_;
  return w;
}

TensorView Qwen3Weights::Destination(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? TensorView() : it->second;
}

Result<Qwen3Weights> Qwen3Weights::Load(const TransformerConfig& config,
                                        const SafetensorsReader& reader,
                                        kernels::Allocator& alloc, Stream stream,
                                        const ProjectionSink& sink) {
  const Device device = alloc.device();
  ASSIGN_OR_RETURN(const ExpertLayout layout, DetectExpertLayout(reader, config));
  RETURN_IF_ERROR(CheckWeights(reader, CausalLmWeightSpecs(config, layout),
                               config.fp8_block_weights));
  ASSIGN_OR_RETURN(Qwen3Weights w, Allocate(config, alloc, stream, !sink, layout));
  std::optional<ProjectionStaging> staged;
  if (sink) staged.emplace(config, alloc, sink, stream, layout);
  std::vector<bf16> staging;  // converted fp32/fp16 tensors
  int64_t loaded = 0;
  const SafetensorsReader::Visitor visit = [&](const TensorInfo& t,
                                               std::span<const std::byte> bytes) -> Status {
    TensorView dst = w.Destination(t.name);
    std::optional<ProjectionName> projection;
    if (dst.empty() && staged && (projection = ParseProjectionName(t.name))) {
      ASSIGN_OR_RETURN(dst, staged->Destination(*projection));
    }
    if (dst.empty()) return Status::Ok();  // not a parameter of this model (e.g. caches)
    const void* src = bytes.data();
    if (t.dtype == DType::kF8E4M3) {  // checked by CheckWeights: has its 128x128 scales
      staging.resize(static_cast<size_t>(dst.numel()));
      RETURN_IF_ERROR(DequantizeFp8BlockWeight(reader, t, bytes, staging));
      src = staging.data();
    } else if (t.dtype != DType::kBF16) {
      // A pageable-memory copy returns once the source is consumed, so one staging
      // buffer serves every tensor.
      staging.resize(static_cast<size_t>(dst.numel()));
      if (!ConvertElements(t.dtype, bytes.data(), DType::kBF16, staging.data(), dst.numel()))
        return InvalidArgumentError("cannot convert {} to bf16",
                                    SafetensorsDTypeName(t.dtype));
      src = staging.data();
    }
    RETURN_IF_ERROR(kernels::CopyFromHost(dst, src, stream));
    ++loaded;
    return projection ? staged->Arrived(*projection) : Status::Ok();
  };
  // Staged: one layer's projections after another, whatever the files' dtype order.
  RETURN_IF_ERROR(staged ? reader.ForEachInOrder(LayerGroupedOrder(reader), visit)
                         : reader.ForEachInFileOrder(visit));
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  if (staged) RETURN_IF_ERROR(staged->CheckComplete());
  const int64_t expected = static_cast<int64_t>(w.by_name_.size()) +
                           (staged ? staged->ExpectedTensors() : 0);
  if (loaded != expected) {
    return DataLossError("{}: loaded {} of the {} weights the config needs (duplicate names?)",
                         reader.files().empty() ? "" : reader.files().front(), loaded, expected);
  }
  return w;
}

int64_t Qwen3Weights::StagingBytes(const TransformerConfig& config) {
  return ProjectionStaging::MaxLayerBytes(config);
}

Result<Qwen3Weights> Qwen3Weights::Random(const TransformerConfig& config,
                                          kernels::Allocator& alloc, uint64_t seed,
                                          Stream stream, float scale,
                                          const ProjectionSink& sink) {
  const Device device = alloc.device();
  ASSIGN_OR_RETURN(Qwen3Weights w, Allocate(config, alloc, stream, !sink));
  std::optional<ProjectionStaging> staged;
  if (sink) staged.emplace(config, alloc, sink, stream);
  ASSIGN_OR_RETURN(Tensor scratch, Tensor::Empty(alloc, DType::kF32, {kRandomChunk}, stream));
  const std::vector<WeightSpec> specs = CausalLmWeightSpecs(config);
  for (size_t i = 0; i < specs.size(); ++i) {
    const WeightSpec& s = specs[i];
    const std::optional<ProjectionName> projection =
        staged ? ParseProjectionName(s.name) : std::nullopt;
    TensorView dst = w.Destination(s.name);
    if (projection) {
      ASSIGN_OR_RETURN(dst, staged->Destination(*projection));
    }
    RETURN_IF_ERROR(FillRandomWeight(s, i, dst, seed, scale,
                                     RandomHeadBound(config.initializer_range, scale), scratch,
                                     stream));
    if (projection) RETURN_IF_ERROR(staged->Arrived(*projection));
  }
  if (staged) RETURN_IF_ERROR(staged->CheckComplete());
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  return w;
}

}  // namespace tandem::models
