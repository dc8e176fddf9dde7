#include "models/io/weight_spec.h"

#include "models/io/fp8_checkpoint.h"

namespace tandem::models {

std::vector<WeightSpec> CausalLmWeightSpecs(const TransformerConfig& c) {
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
