#include "models/io/weight_spec.h"

#include <charconv>

#include "models/io/fp8_checkpoint.h"

namespace tandem::models {

namespace {

const char* FirstFile(const SafetensorsReader& reader) {
  return reader.files().empty() ? "" : reader.files().front().c_str();
}

}  // namespace

void AppendMoeExpertSpecs(const std::string& layer_prefix, int64_t hidden, const MoeConfig& m,
                          ExpertLayout layout, std::vector<WeightSpec>* specs) {
  const std::string& p = layer_prefix;
  const int64_t h = hidden, e = m.num_experts, i = m.moe_intermediate_size;
  specs->push_back({p + "mlp.gate.weight", {e, h}});
  if (layout == ExpertLayout::kFused) {
    specs->push_back({p + "mlp.experts.gate_up_proj", {e, 2 * i, h}});
    specs->push_back({p + "mlp.experts.down_proj", {e, h, i}});
    return;
  }
  for (int64_t x = 0; x < e; ++x) {
    const std::string q = fmt::format("{}mlp.experts.{}.", p, x);
    specs->push_back({q + "gate_proj.weight", {i, h}});
    specs->push_back({q + "up_proj.weight", {i, h}});
    specs->push_back({q + "down_proj.weight", {h, i}});
  }
}

Result<ExpertLayout> DetectExpertLayout(const SafetensorsReader& reader,
                                        const TransformerConfig& c) {
  if (!c.moe) return ExpertLayout::kPerExpert;
  std::vector<std::string> prefixes;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.IsMoeLayer(l)) prefixes.push_back(fmt::format("model.layers.{}.", l));
  return DetectExpertLayout(reader, prefixes, c.moe->num_experts);
}

Result<ExpertLayout> DetectExpertLayout(const SafetensorsReader& reader,
                                        const std::vector<std::string>& moe_layer_prefixes,
                                        int64_t num_experts) {
  const int64_t e = num_experts;
  for (const std::string& layer : moe_layer_prefixes) {
    const std::string p = layer + "mlp.experts.";
    if (const TensorInfo* fused = reader.Find(p + "gate_up_proj")) {
      if (fused->shape.empty() || fused->shape[0] != e)
        return DataLossError("{}: holds {} experts but config.json's num_experts is {}",
                             reader.Where(*fused),
                             fused->shape.empty() ? 0 : fused->shape[0], e);
      return ExpertLayout::kFused;
    }
    // Per-expert: the highest expert index of this layer in the checkpoint.
    int64_t held = 0;
    for (const TensorInfo& t : reader.tensors()) {
      if (t.name.compare(0, p.size(), p) != 0) continue;
      int64_t x = -1;
      std::from_chars(t.name.data() + p.size(), t.name.data() + t.name.size(), x);
      if (x >= e)
        return DataLossError("{}: names expert {} but config.json's num_experts is {}",
                             reader.Where(t), x, e);
      held = std::max(held, x + 1);
    }
    for (int64_t x = 0; x < e; ++x)
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        const std::string name = fmt::format("{}{}.{}.weight", p, x, proj);
        if (reader.Find(name) == nullptr)
          return NotFoundError("checkpoint {} has no tensor '{}' ({} holds {} of the {} "
                               "experts config.json's num_experts names)", FirstFile(reader),
                               name, std::string_view(layer).substr(0, layer.size() - 1), held, e);
      }
    return ExpertLayout::kPerExpert;
  }
  return ExpertLayout::kPerExpert;
}

std::vector<WeightSpec> CausalLmWeightSpecs(const TransformerConfig& c, ExpertLayout layout) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  std::vector<WeightSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    specs.push_back({p + "input_layernorm.weight", {h}});
    specs.push_back({p + "self_attn.q_proj.weight", {q, h}});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    specs.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    specs.push_back({p + "post_attention_layernorm.weight", {h}});
    if (c.IsMoeLayer(i)) {
      AppendMoeExpertSpecs(p, h, *c.moe, layout, &specs);
      continue;
    }
    specs.push_back({p + "mlp.gate_proj.weight", {ff, h}});
    specs.push_back({p + "mlp.up_proj.weight", {ff, h}});
    specs.push_back({p + "mlp.down_proj.weight", {h, ff}});
  }
  specs.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, h}});
  return specs;
}

Status CheckWeights(const SafetensorsReader& reader, const std::vector<WeightSpec>& specs,
                    bool fp8_block_weights) {
  for (const WeightSpec& s : specs) {
    const TensorInfo* t = reader.Find(s.name);
    if (t == nullptr) {
      return NotFoundError("checkpoint {} has no tensor '{}'",
                           reader.files().empty() ? "" : reader.files().front(), s.name);
    }
    if (t->shape != s.shape) {
      return DataLossError("{}: shape {} but the config needs {}", reader.Where(*t),
                           fmt::format("[{}]", fmt::join(t->shape, ", ")),
                           fmt::format("[{}]", fmt::join(s.shape, ", ")));
    }
    if (t->dtype == DType::kF8E4M3 || t->dtype == DType::kF8E5M2) {
      if (!fp8_block_weights)
        return DataLossError("{}: dtype {} but config.json has no FP8 quantization_config",
                             reader.Where(*t), SafetensorsDTypeName(t->dtype));
      RETURN_IF_ERROR(CheckFp8BlockWeight(reader, *t));
      continue;
    }
    if (t->dtype != DType::kBF16 && t->dtype != DType::kF16 && t->dtype != DType::kF32) {
      return DataLossError("{}: dtype {} is not a float type", reader.Where(*t),
                           SafetensorsDTypeName(t->dtype));
    }
  }
  return Status::Ok();
}

}  // namespace tandem::models
