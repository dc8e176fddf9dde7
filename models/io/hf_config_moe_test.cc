// HF config.json parsing of mixture-of-experts targets (model_type qwen3_moe): the public
// Qwen3-30B-A3B config, transformers' layer rule (decoder_sparse_step, mlp_only_layers), the
// Mixtral spelling num_local_experts, the round trip, and what is refused with the key named.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/io/hf_config.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// Qwen/Qwen3-30B-A3B config.json as published.
constexpr const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 48,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "norm_topk_prob": true,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

Result<TransformerConfig> Parse(const json& j) { return ParseTransformerConfig(j, "cfg.json"); }

TEST(HfConfigMoeTest, Qwen3_30B_A3B) {
  auto c = Parse(json::parse(kQwen3_30B_A3B));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "qwen3_moe");
  EXPECT_EQ(c->family, ModelFamily::kQwen3);
  EXPECT_TRUE(c->qk_norm);
  ASSERT_TRUE(c->moe.has_value());
  EXPECT_EQ(c->moe->num_experts, 128);
  EXPECT_EQ(c->moe->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe->moe_intermediate_size, 768);
  EXPECT_TRUE(c->moe->norm_topk_prob);
  EXPECT_EQ(c->intermediate_size, 6144);
  for (int64_t l = 0; l < 48; ++l) EXPECT_TRUE(c->IsMoeLayer(l)) << l;
  EXPECT_FALSE(c->HasDenseMlp());
  // Round trip through the HF spelling.
  auto again = Parse(TransformerConfigToJson(*c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(TransformerConfigToJson(*again), TransformerConfigToJson(*c));
  EXPECT_EQ(again->moe->num_experts, 128);
}

TEST(HfConfigMoeTest, SparseStepAndDenseLayers) {
  json j = json::parse(kQwen3_30B_A3B);
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  j.erase("norm_topk_prob");  // transformers' default: false
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->moe->norm_topk_prob);
  const bool want[6] = {false, true, false, false, false, true};  // (i + 1) % 2 == 0, not 3
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c->IsMoeLayer(l), want[l]) << l;
  EXPECT_TRUE(c->HasDenseMlp());
}

TEST(HfConfigMoeTest, NumLocalExpertsSpelling) {
  json j = json::parse(kQwen3_30B_A3B);
  j.erase("num_experts");
  j["num_local_experts"] = 64;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->moe->num_experts, 64);
  j["num_experts"] = 32;
  auto both = Parse(j);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("num_local_experts"), std::string::npos);
}

// The message of parsing kQwen3_30B_A3B with `key` set to `value` (or erased when null).
std::string ErrorWith(const char* key, const json& value) {
  json j = json::parse(kQwen3_30B_A3B);
  if (value.is_null()) j.erase(key);
  else j[key] = value;
  auto c = Parse(j);
  return c.ok() ? std::string() : c.status().ToString();
}

TEST(HfConfigMoeTest, RefusesNamingTheKey) {
  struct Case {
    const char* key;
    json value;
    const char* says;
  };
  const Case cases[] = {
      {"num_experts_per_tok", 129, "'num_experts_per_tok': top-k 129 must be in 1..num_experts 128"},
      {"num_experts_per_tok", 33, "'num_experts_per_tok': top-k 33 is above the 32"},
      {"num_experts_per_tok", nullptr, "'num_experts_per_tok': missing"},
      {"num_experts", 0, "'num_experts': 0 experts"},
      {"num_experts", 4096, "'num_experts': 4096 experts"},
      {"moe_intermediate_size", nullptr, "'moe_intermediate_size': missing"},
      {"decoder_sparse_step", 0, "'decoder_sparse_step': must be in 1..num_hidden_layers"},
      {"mlp_only_layers", json::array({48}), "'mlp_only_layers': layer 48 is not in [0, 48)"},
      {"norm_topk_prob", "yes", "'norm_topk_prob': expected true or false"},
      {"shared_expert_intermediate_size", 512, "'shared_expert_intermediate_size'"},
  };
  for (const Case& c : cases) {
    const std::string err = ErrorWith(c.key, c.value);
    EXPECT_NE(err.find("cfg.json"), std::string::npos) << c.key << ": " << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << c.key << ": " << err;
  }
  // Experts in a dense model type are still refused.
  json dense = json::parse(kQwen3_30B_A3B);
  dense["model_type"] = "qwen3";
  auto c = Parse(dense);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("qwen3_moe only"), std::string::npos)
      << c.status().ToString();
}

TEST(HfConfigMoeTest, JobTableKeysIncludeTheMoeKeys) {
  json j = json::parse(kQwen3_30B_A3B);
  j.erase("transformers_version");
  j.erase("use_cache");
  EXPECT_TRUE(CheckOnlyKnownKeys(j, TransformerConfigKeys(), "t").ok());
}

}  // namespace
}  // namespace tandem::models
