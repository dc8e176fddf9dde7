// The mixture-of-experts part of a qwen3_moe config.json (models/io/hf_config.h): parsing,
// validation against what kernels/moe runs, and the HF spelling back.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "kernels/moe/routing.h"
#include "models/io/hf_config.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {

using json = nlohmann::json;

bool TransformerConfig::IsMoeLayer(int64_t layer) const {
  if (!moe) return false;
  const auto& dense = moe->mlp_only_layers;
  return std::find(dense.begin(), dense.end(), layer) == dense.end() &&
         (layer + 1) % moe->decoder_sparse_step == 0;
}

bool TransformerConfig::HasDenseMlp() const {
  for (int64_t i = 0; i < num_hidden_layers; ++i)
    if (!IsMoeLayer(i)) return true;
  return false;
}

namespace config_detail {
namespace {

template <typename... Args>
Status KeyError(std::string_view source, std::string_view key, fmt::format_string<Args...> f,
                Args&&... args) {
  return InvalidArgumentError("{}: key '{}': {}", source, key,
                              fmt::format(f, std::forward<Args>(args)...));
}

bool Has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

}  // namespace

const std::vector<std::string>& MoeConfigKeys() {
  static const std::vector<std::string> keys = {
      "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob",
      "num_experts",         "num_experts_per_tok", "num_local_experts", "output_router_logits",
      "router_aux_loss_coef", "shared_expert_intermediate_size"};
  return keys;
}

Status ParseMoeConfig(const json& j, std::string_view source, TransformerConfig* c) {
  MoeConfig m;
  if (Has(j, "num_experts")) {
    ASSIGN_OR_RETURN(m.num_experts, GetInt(j, source, "num_experts"));
    if (Has(j, "num_local_experts")) {
      ASSIGN_OR_RETURN(const int64_t local, GetInt(j, source, "num_local_experts"));
      if (local != m.num_experts)
        return KeyError(source, "num_local_experts", "{} disagrees with num_experts {}", local,
                        m.num_experts);
    }
  } else {
    ASSIGN_OR_RETURN(m.num_experts, GetInt(j, source, "num_local_experts"));
  }
  if (m.num_experts < 1 || m.num_experts > kernels::kMoeMaxExperts)
    return KeyError(source, "num_experts", "{} experts; 1..{} are supported", m.num_experts,
                    kernels::kMoeMaxExperts);
  ASSIGN_OR_RETURN(m.num_experts_per_tok, GetInt(j, source, "num_experts_per_tok"));
  if (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts)
    return KeyError(source, "num_experts_per_tok", "top-k {} must be in 1..num_experts {}",
                    m.num_experts_per_tok, m.num_experts);
  if (m.num_experts_per_tok > kernels::kMoeMaxTopK)
    return KeyError(source, "num_experts_per_tok", "top-k {} is above the {} implemented",
                    m.num_experts_per_tok, kernels::kMoeMaxTopK);
  ASSIGN_OR_RETURN(m.moe_intermediate_size, GetInt(j, source, "moe_intermediate_size"));
  if (m.moe_intermediate_size < 1 || m.moe_intermediate_size > (int64_t{1} << 22))
    return KeyError(source, "moe_intermediate_size", "must be in 1..{}, got {}", int64_t{1} << 22,
                    m.moe_intermediate_size);
  if (Has(j, "norm_topk_prob")) {
    if (!j["norm_topk_prob"].is_boolean())
      return KeyError(source, "norm_topk_prob", "expected true or false, got {}",
                      DescribeJson(j["norm_topk_prob"]));
    m.norm_topk_prob = j["norm_topk_prob"].get<bool>();
  }
  ASSIGN_OR_RETURN(m.decoder_sparse_step, GetInt(j, source, "decoder_sparse_step", 1));
  if (m.decoder_sparse_step < 1 || m.decoder_sparse_step > c->num_hidden_layers)
    return KeyError(source, "decoder_sparse_step", "must be in 1..num_hidden_layers {}, got {}",
                    c->num_hidden_layers, m.decoder_sparse_step);
  if (Has(j, "mlp_only_layers")) {
    ASSIGN_OR_RETURN(m.mlp_only_layers, GetIntList(j, source, "mlp_only_layers"));
    for (int64_t l : m.mlp_only_layers)
      if (l < 0 || l >= c->num_hidden_layers)
        return KeyError(source, "mlp_only_layers", "layer {} is not in [0, {})", l,
                        c->num_hidden_layers);
  }
  if (Has(j, "shared_expert_intermediate_size")) {
    ASSIGN_OR_RETURN(const int64_t shared, GetInt(j, source, "shared_expert_intermediate_size"));
    if (shared != 0)
      return KeyError(source, "shared_expert_intermediate_size",
                      "{}: a shared expert is not part of qwen3_moe (not implemented)", shared);
  }
  c->moe = std::move(m);
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
