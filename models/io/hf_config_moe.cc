// The mixture-of-experts part of a qwen3_moe config.json or a qwen3_5_moe text config
// (models/io/hf_config.h): parsing, validation against what kernels/moe runs, and the HF
// spelling back.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "kernels/moe/routing.h"
#include "models/io/hf_config.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {

using json = nlohmann::json;

bool MoeConfig::IsMoeLayer(int64_t layer) const {
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) ==
             mlp_only_layers.end() &&
         (layer + 1) % decoder_sparse_step == 0;
}

bool TransformerConfig::IsMoeLayer(int64_t layer) const { return moe && moe->IsMoeLayer(layer); }

bool TransformerConfig::HasDenseMlp() const {
  for (int64_t i = 0; i < num_hidden_layers; ++i)
    if (!IsMoeLayer(i)) return true;
  return false;
}

namespace {

using config_detail::GetInt;

constexpr int64_t kMaxWidth = int64_t{1} << 22;  // an expert's MLP width
using config_detail::GetIntList;

// Key errors name the key as the config spells it ("text_config.num_experts" in a wrapper).
struct Keys {
  std::string_view source, prefix;
  template <typename... Args>
  Status Error(std::string_view key, fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgumentError("{}: key '{}{}': {}", source, prefix, key,
                                fmt::format(f, std::forward<Args>(args)...));
  }
  // GetInt's errors name the key without the prefix: add it.
  Result<int64_t> Int(const json& j, const char* key,
                      std::optional<int64_t> fallback = std::nullopt) const {
    Result<int64_t> v = GetInt(j, source, key, fallback);
    if (!v.ok() && !prefix.empty())
      return InvalidArgumentError("{} (in {})", v.status().message(),
                                  prefix.substr(0, prefix.size() - 1));
    return v;
  }
};

bool Has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// num_experts (or num_local_experts), num_experts_per_tok and moe_intermediate_size.
Status ParseExperts(const json& j, const Keys& k, MoeConfig* m) {
  if (Has(j, "num_experts")) {
    ASSIGN_OR_RETURN(m->num_experts, k.Int(j, "num_experts"));
    if (Has(j, "num_local_experts")) {
      ASSIGN_OR_RETURN(const int64_t local, k.Int(j, "num_local_experts"));
      if (local != m->num_experts)
        return k.Error("num_local_experts", "{} disagrees with num_experts {}", local,
                       m->num_experts);
    }
  } else {
    ASSIGN_OR_RETURN(m->num_experts, k.Int(j, "num_local_experts"));
  }
  if (m->num_experts < 1 || m->num_experts > kernels::kMoeMaxExperts)
    return k.Error("num_experts", "{} experts; 1..{} are supported", m->num_experts,
                   kernels::kMoeMaxExperts);
  ASSIGN_OR_RETURN(m->num_experts_per_tok, k.Int(j, "num_experts_per_tok"));
  if (m->num_experts_per_tok < 1 || m->num_experts_per_tok > m->num_experts)
    return k.Error("num_experts_per_tok", "top-k {} must be in 1..num_experts {}",
                   m->num_experts_per_tok, m->num_experts);
  if (m->num_experts_per_tok > kernels::kMoeMaxTopK)
    return k.Error("num_experts_per_tok", "top-k {} is above the {} implemented",
                   m->num_experts_per_tok, kernels::kMoeMaxTopK);
  ASSIGN_OR_RETURN(m->moe_intermediate_size, k.Int(j, "moe_intermediate_size"));
  if (m->moe_intermediate_size < 1 || m->moe_intermediate_size > kMaxWidth)
    return k.Error("moe_intermediate_size", "must be in 1..{}, got {}", kMaxWidth,
                   m->moe_intermediate_size);
  return Status::Ok();
}

// norm_topk_prob, decoder_sparse_step and mlp_only_layers (qwen3_moe's layer rule).
Status ParseSparseLayers(const json& j, const Keys& k, int64_t layers, MoeConfig* m) {
  if (Has(j, "norm_topk_prob")) {
    if (!j["norm_topk_prob"].is_boolean())
      return k.Error("norm_topk_prob", "expected true or false, got {}",
                     DescribeJson(j["norm_topk_prob"]));
    m->norm_topk_prob = j["norm_topk_prob"].get<bool>();
  }
  ASSIGN_OR_RETURN(m->decoder_sparse_step, k.Int(j, "decoder_sparse_step", 1));
  if (m->decoder_sparse_step < 1 || m->decoder_sparse_step > layers)
    return k.Error("decoder_sparse_step", "must be in 1..num_hidden_layers {}, got {}", layers,
                   m->decoder_sparse_step);
  if (Has(j, "mlp_only_layers")) {
    ASSIGN_OR_RETURN(m->mlp_only_layers, GetIntList(j, k.source, "mlp_only_layers"));
    for (int64_t l : m->mlp_only_layers)
      if (l < 0 || l >= layers)
        return k.Error("mlp_only_layers", "layer {} is not in [0, {})", l, layers);
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& MoeConfigKeys() {
  static const std::vector<std::string> keys = {
      "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob",
      "num_experts",         "num_experts_per_tok", "num_local_experts", "output_router_logits",
      "router_aux_loss_coef", "shared_expert_intermediate_size"};
  return keys;
}

Result<MoeConfig> ParseMoeKeys(const json& j, std::string_view source, std::string_view key_prefix,
                               int64_t num_hidden_layers, MoeFamily family) {
  const Keys k{source, key_prefix};
  MoeConfig m;
  RETURN_IF_ERROR(ParseExperts(j, k, &m));
  RETURN_IF_ERROR(ParseSparseLayers(j, k, num_hidden_layers, &m));
  const bool shared_given = Has(j, "shared_expert_intermediate_size");
  if (shared_given) {
    ASSIGN_OR_RETURN(m.shared_expert_intermediate_size,
                     k.Int(j, "shared_expert_intermediate_size"));
  }
  if (family == MoeFamily::kQwen3Moe) {
    if (m.shared_expert_intermediate_size != 0)
      return k.Error("shared_expert_intermediate_size",
                     "{}: a shared expert is not part of qwen3_moe (not implemented)",
                     m.shared_expert_intermediate_size);
    return m;
  }
  // qwen3_5_moe: transformers drops these keys; values that would change the model are
  // refused rather than ignored.
  if (Has(j, "norm_topk_prob") && !m.norm_topk_prob)
    return k.Error("norm_topk_prob",
                   "false is not implemented: the qwen3_5_moe router always renormalises the "
                   "top-k weights");
  m.norm_topk_prob = true;
  if (m.decoder_sparse_step != 1)
    return k.Error("decoder_sparse_step",
                   "{} is not implemented: every qwen3_5_moe layer is a MoE layer (1)",
                   m.decoder_sparse_step);
  if (!m.mlp_only_layers.empty())
    return k.Error("mlp_only_layers",
                   "dense layers are not implemented: every qwen3_5_moe layer is a MoE layer "
                   "(give [] or leave it out)");
  if (!shared_given) return k.Error("shared_expert_intermediate_size", "missing");
  if (m.shared_expert_intermediate_size < 1 || m.shared_expert_intermediate_size > kMaxWidth)
    return k.Error("shared_expert_intermediate_size", "must be in 1..{}, got {}", kMaxWidth,
                   m.shared_expert_intermediate_size);
  return m;
}

namespace config_detail {

Status ParseMoeConfig(const json& j, std::string_view source, TransformerConfig* c) {
  ASSIGN_OR_RETURN(c->moe,
                   ParseMoeKeys(j, source, "", c->num_hidden_layers, MoeFamily::kQwen3Moe));
  return Status::Ok();
}

void MoeConfigToJson(const TransformerConfig& c, json* j) {
  if (!c.moe) return;
  const MoeConfig& m = *c.moe;
  (*j)["num_experts"] = m.num_experts;
  (*j)["num_experts_per_tok"] = m.num_experts_per_tok;
  (*j)["moe_intermediate_size"] = m.moe_intermediate_size;
  (*j)["norm_topk_prob"] = m.norm_topk_prob;
  (*j)["decoder_sparse_step"] = m.decoder_sparse_step;
  (*j)["mlp_only_layers"] = m.mlp_only_layers;
}

}  // namespace config_detail
}  // namespace tandem::models
