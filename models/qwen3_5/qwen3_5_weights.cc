#include "models/qwen3_5/qwen3_5_weights.h"

#include <algorithm>
#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "kernels/random/philox.h"

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

bool IsProjection(const WeightSpec& s) {
  return s.shape.size() == 2 && s.name.find(".layers.") != std::string::npos;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<Placed> Layout(const Qwen35Config& c) {
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
  return TensorView(first.data(), DType::kBF16, {rows, cols}, first.device());
}

// f32 scratch elements per random fill.
constexpr int64_t kRandomChunk = int64_t{1} << 22;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(),
                                                suffix) == 0;
}

// Fills `dst` (bf16) with tensor `s`'s random values (Qwen35Weights::Random's ranges):
// Philox stream `seed`, offset (index << 20) + chunk for each chunk of `scratch`.
Status FillRandom(const WeightSpec& s, size_t index, TensorView dst, uint64_t seed, float scale,
                  const Tensor& scratch, Stream stream) {
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
    lo = -scale;
    hi = scale;
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

std::vector<WeightSpec> Qwen35WeightSpecs(const Qwen35Config& c) {
  std::vector<WeightSpec> specs;
  for (Placed& p : Layout(c)) specs.push_back(std::move(p.spec));
  return specs;
}

Result<Qwen35Weights> Qwen35Weights::Allocate(const Qwen35Config& c, kernels::Allocator& alloc,
                                              Stream stream) {
  const Device device = alloc.device();
  const std::vector<Placed> layout = Layout(c);
  std::vector<int64_t> offsets;
  int64_t total[2] = {0, 0};  // the rest, the projections
  for (const Placed& p : layout) {
    int64_t& t = total[p.projection ? 1 : 0];
    if (!p.packed) t = (t + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
    offsets.push_back(t);
    t += Numel(p.spec.shape) * 2;
  }
  Qwen35Weights w;
  w.config_ = c;
  ASSIGN_OR_RETURN(w.storage_,
                   Tensor::Empty(alloc, DType::kU8, {std::max<int64_t>(total[0], 1)}, stream));
  ASSIGN_OR_RETURN(w.projections_,
                   Tensor::Empty(alloc, DType::kU8, {std::max<int64_t>(total[1], 1)}, stream));
  char* base[2] = {static_cast<char*>(w.storage_.data()),
                   static_cast<char*>(w.projections_.data())};
  for (size_t i = 0; i < layout.size(); ++i) {
    const std::vector<int64_t>& s = layout[i].spec.shape;
    w.by_name_[layout[i].spec.name] =
        TensorView(base[layout[i].projection ? 1 : 0] + offsets[i], DType::kBF16,
                   Shape::FromArray(s.data(), static_cast<int>(s.size())), device);
  }
  auto at = [&](const std::string& name) { return w.by_name_.at(name); };
  const std::string& p = c.weight_prefix;
  const int64_t h = c.hidden_size, hv = c.linear_num_value_heads;
  w.embed_ = at(p + "embed_tokens.weight");
  w.final_norm_ = at(p + "norm.weight");
  w.lm_head_ = c.tie_word_embeddings ? w.embed_ : at("lm_head.weight");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = fmt::format("{}layers.{}.", p, i);
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
    lw.gate_up = Block(at(l + "mlp.gate_proj.weight"), 2 * c.intermediate_size, h);
    lw.down_proj = at(l + "mlp.down_proj.weight");
    w.layers_.push_back(lw);
  }
  return w;
}

Status Qwen35Weights::ReleaseProjections(Stream stream) {
  if (!has_projections()) return Status::Ok();
  // Whatever was enqueued on `stream` (e.g. quantizing them) reads them before they go.
  RETURN_IF_ERROR(kernels::SynchronizeStream(device(), stream));
  for (Qwen35LayerWeights& l : layers_) {
    for (TensorView* v : {&l.linear.in_proj, &l.linear.out_proj, &l.attn.q_proj, &l.attn.k_proj,
                          &l.attn.v_proj, &l.attn.o_proj, &l.gate_up, &l.down_proj})
      *v = TensorView();
  }
  for (const WeightSpec& s : Qwen35WeightSpecs(config_))
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
                                          kernels::Allocator& alloc, Stream stream) {
  const Device device = alloc.device();
  RETURN_IF_ERROR(CheckWeights(reader, Qwen35WeightSpecs(config)));
  ASSIGN_OR_RETURN(Qwen35Weights w, Allocate(config, alloc, stream));
  std::vector<bf16> staging;  // converted fp32/fp16 tensors
  int64_t loaded = 0;
  RETURN_IF_ERROR(reader.ForEachInFileOrder(
      [&](const TensorInfo& t, std::span<const std::byte> bytes) -> Status {
        const TensorView dst = w.Destination(t.name);
        if (dst.empty()) return Status::Ok();  // vision tower, MTP head, caches
        const void* src = bytes.data();
        if (t.dtype != DType::kBF16) {
          // A pageable copy returns once the source is consumed: one staging buffer serves all.
          staging.resize(static_cast<size_t>(dst.numel()));
          if (!ConvertElements(t.dtype, bytes.data(), DType::kBF16, staging.data(), dst.numel()))
            return DataLossError("{}: cannot convert {} to bf16", reader.Where(t),
                                 SafetensorsDTypeName(t.dtype));
          src = staging.data();
        }
        RETURN_IF_ERROR(kernels::CopyFromHost(dst, src, stream));
        ++loaded;
        return Status::Ok();
      }));
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  const int64_t expected = static_cast<int64_t>(w.by_name_.size());
  if (loaded != expected)
    return DataLossError("{}: loaded {} of the {} weights the config needs (duplicate names?)",
                         reader.files().empty() ? "" : reader.files().front(), loaded, expected);
  return w;
}

Result<Qwen35Weights> Qwen35Weights::Random(const Qwen35Config& config,
                                            kernels::Allocator& alloc, uint64_t seed,
                                            Stream stream, float scale) {
  const Device device = alloc.device();
  ASSIGN_OR_RETURN(Qwen35Weights w, Allocate(config, alloc, stream));
  ASSIGN_OR_RETURN(Tensor scratch, Tensor::Empty(alloc, DType::kF32, {kRandomChunk}, stream));
  const std::vector<WeightSpec> specs = Qwen35WeightSpecs(config);
  for (size_t i = 0; i < specs.size(); ++i)
    RETURN_IF_ERROR(FillRandom(specs[i], i, w.by_name_.at(specs[i].name), seed, scale, scratch,
                               stream));
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
    RETURN_IF_ERROR(FillRandom(spec, index, dst, seed, scale, scratch, stream));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  return head;
}

}  // namespace tandem::models
