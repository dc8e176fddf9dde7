// HF config.json parsing: the public Qwen3-8B config (transformers 4.x spelling), the
// transformers 5 spelling, Llama-3, and the fields tandem refuses rather than ignores.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/io/hf_config.h"
#include "models/io/model_test_util.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// Qwen/Qwen3-8B config.json as published.
constexpr const char* kQwen3_8B = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// Meta-Llama-3-8B config.json as published (no head_dim: derived).
constexpr const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "use_cache": true,
  "vocab_size": 128256
})";

json Qwen() { return json::parse(kQwen3_8B); }

// Expects a parse failure whose message names the source and `key`.
void ExpectRejected(const json& j, const std::string& key, const std::string& also = "") {
  auto c = ParseTransformerConfig(j, "/m/config.json");
  ASSERT_FALSE(c.ok()) << "accepted a config with bad '" << key << "'";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("/m/config.json"), std::string::npos) << m;
  EXPECT_NE(m.find("'" + key + "'"), std::string::npos) << m;
  if (!also.empty()) {
    EXPECT_NE(m.find(also), std::string::npos) << m;
  }
}

TEST(HfConfigTest, ParsesQwen3_8B) {
  auto c = ParseTransformerConfigText(kQwen3_8B, "Qwen3-8B/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family, ModelFamily::kQwen3);
  EXPECT_EQ(c->architectures, std::vector<std::string>{"Qwen3ForCausalLM"});
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->num_hidden_layers, 36);
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 12288);
  EXPECT_EQ(c->rope_theta, 1000000.0);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->initializer_range, 0.02);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->max_position_embeddings, 40960);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->rotary_dim, 128);
  EXPECT_EQ(c->dtype, kernels::DType::kBF16);
  EXPECT_EQ(c->layer_types,
            std::vector<LayerType>(36, LayerType::kFullAttention));
  EXPECT_FALSE(c->sliding_window.has_value());
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_EQ(c->q_dim(), 4096);
  EXPECT_EQ(c->kv_dim(), 1024);
}

TEST(HfConfigTest, ParsesTransformers5Spelling) {
  json j = Qwen();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("torch_dtype");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000000.0}};
  j["dtype"] = "float32";
  j["layer_types"] = std::vector<std::string>(36, "full_attention");
  auto c = ParseTransformerConfig(j, "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_theta, 5000000.0);
  EXPECT_EQ(c->dtype, kernels::DType::kF32);
}

TEST(HfConfigTest, ParsesLlama3WithoutQkNorm) {
  auto c = ParseTransformerConfigText(kLlama3_8B, "llama/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family, ModelFamily::kLlama);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 128);  // 4096 / 32
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_EQ(c->vocab_size, 128256);
}

TEST(HfConfigTest, SlidingLayersFromMaxWindowLayersOrLayerTypes) {
  json j = Qwen();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 30;
  auto c = ParseTransformerConfig(j, "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->layer_types[29], LayerType::kFullAttention);
  EXPECT_EQ(c->layer_types[30], LayerType::kSlidingAttention);
  EXPECT_EQ(c->sliding_window, 4096);

  std::vector<std::string> types(36, "full_attention");
  types[3] = "sliding_attention";
  j["layer_types"] = types;
  c = ParseTransformerConfig(j, "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->layer_types[3], LayerType::kSlidingAttention);
  EXPECT_EQ(c->layer_types[30], LayerType::kFullAttention);
}

TEST(HfConfigTest, RejectsUnsupportedFields) {
  json j = Qwen();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  ExpectRejected(j, "rope_scaling", "yarn");
  j = Qwen();
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 1.0}};
  ExpectRejected(j, "rope_parameters", "llama3");
  j = Qwen();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ExpectRejected(j, "rope_scaling", "linear");
  j = Qwen();
  j["model_type"] = "qwen3_next";
  ExpectRejected(j, "model_type", "Gated DeltaNet");
  j["model_type"] = "qwen3_5";
  ExpectRejected(j, "model_type", "Gated DeltaNet");
  j["model_type"] = "mistral";
  ExpectRejected(j, "model_type");
  j = Qwen();
  std::vector<std::string> types(36, "full_attention");
  types[2] = "linear_attention";
  j["layer_types"] = types;
  ExpectRejected(j, "layer_types", "Gated DeltaNet");
  types[2] = "sliding_attention";  // without use_sliding_window
  j["layer_types"] = types;
  ExpectRejected(j, "layer_types", "use_sliding_window");
  j["layer_types"] = std::vector<std::string>(35, "full_attention");
  ExpectRejected(j, "layer_types");
  j = Qwen();
  j["hidden_act"] = "gelu";
  ExpectRejected(j, "hidden_act");
  j = Qwen();
  j["attention_bias"] = true;
  ExpectRejected(j, "attention_bias");
  j = Qwen();
  j["torch_dtype"] = "float8_e4m3fn";
  ExpectRejected(j, "torch_dtype");
  j = Qwen();
  j["num_experts"] = 128;
  ExpectRejected(j, "num_experts");
  j = Qwen();
  j["quantization_config"] = {{"quant_method", "fp8"}};
  ExpectRejected(j, "quantization_config");
}

TEST(HfConfigTest, RejectsMissingOrBadValues) {
  json j = Qwen();
  j.erase("vocab_size");
  ExpectRejected(j, "vocab_size", "missing");
  j = Qwen();
  j["hidden_size"] = "4096";
  ExpectRejected(j, "hidden_size", "integer");
  j = Qwen();
  j["num_key_value_heads"] = 5;
  ExpectRejected(j, "num_key_value_heads");
  j = Qwen();
  j["num_hidden_layers"] = 0;
  ExpectRejected(j, "num_hidden_layers");
  j = Qwen();
  j.erase("rope_theta");
  ExpectRejected(j, "rope_theta", "missing");
  j = Qwen();
  j.erase("head_dim");
  j["num_attention_heads"] = 48;  // 4096 % 48 != 0 and no head_dim to fall back on
  j["num_key_value_heads"] = 8;
  ExpectRejected(j, "head_dim");
  // Sizes whose products (vocab * hidden, ...) would overflow int64 downstream,
  // and a vocabulary beyond the int32 token ids.
  j = Qwen();
  j["vocab_size"] = int64_t{1} << 40;
  ExpectRejected(j, "vocab_size", "above the limit");
  j = Qwen();
  j["hidden_size"] = int64_t{1} << 40;
  ExpectRejected(j, "hidden_size", "above the limit");
  j = Qwen();
  j["head_dim"] = int64_t{1} << 40;
  ExpectRejected(j, "head_dim", "at most 16384");
  j = Qwen();
  j["initializer_range"] = -0.02;
  ExpectRejected(j, "initializer_range", "must be positive");
  j = Qwen();
  j["initializer_range"] = "0.02";
  ExpectRejected(j, "initializer_range", "expected a number");
  j = Qwen();
  j.erase("initializer_range");
  auto absent = ParseTransformerConfig(j, "x");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->initializer_range.has_value());
  auto bad = ParseTransformerConfigText("{\"model_type\": ", "broken.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("broken.json"), std::string::npos);
}

TEST(HfConfigTest, DeepNestingIsRefusedNotACrash) {
  // hidden_act nested 200,000 deep: quoting it in the error once dumped it recursively.
  std::string text = Qwen().dump();
  text.pop_back();
  text += ", \"hidden_act\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  auto c = ParseTransformerConfigText(text, "deep/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("deep/config.json: line 1"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("nested deeper than"), std::string::npos);
  // A long bad value is quoted cut short.
  json j = Qwen();
  j["hidden_act"] = std::string(1 << 20, 'x');
  auto big = ParseTransformerConfig(j, "big/config.json");
  ASSERT_FALSE(big.ok());
  EXPECT_LT(big.status().message().size(), 400u);
}

TEST(HfConfigTest, OnlyKnownKeysNamesATypo) {
  // The published config less the keys transformers writes for itself: all known.
  json j = Qwen();
  j.erase("transformers_version");
  j.erase("use_cache");
  EXPECT_TRUE(CheckOnlyKnownKeys(j, TransformerConfigKeys(), "c").ok());
  // What ParseTransformerConfig writes back is known too.
  auto c = ParseTransformerConfig(Qwen(), "c");
  ASSERT_TRUE(c.ok());
  const Status round = CheckOnlyKnownKeys(TransformerConfigToJson(*c), TransformerConfigKeys(), "c");
  EXPECT_TRUE(round.ok()) << round.ToString();
  j["rope_thetta"] = 10000.0;
  Status st = CheckOnlyKnownKeys(j, TransformerConfigKeys(), "job.toml:9: actors.t.target_config");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job.toml:9: actors.t.target_config: unknown key \"rope_thetta\" "
                              "(did you mean 'rope_theta'?)"), std::string::npos)
      << st.message();
}

TEST(HfConfigTest, JsonRoundTripAndLoadFromDirectory) {
  auto c = ParseTransformerConfigText(kQwen3_8B, "x");
  ASSERT_TRUE(c.ok());
  json out = TransformerConfigToJson(*c);
  EXPECT_EQ(out["rope_parameters"]["rope_theta"], 1000000.0);
  testing::ScratchDir dir;
  testing::WriteRaw(dir.File("config.json"), out.dump(2));
  auto back = LoadTransformerConfig(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->hidden_size, c->hidden_size);
  EXPECT_EQ(back->head_dim, c->head_dim);
  EXPECT_EQ(back->rope_theta, c->rope_theta);
  EXPECT_EQ(back->layer_types, c->layer_types);
  EXPECT_EQ(back->eos_token_ids, c->eos_token_ids);
  EXPECT_EQ(back->initializer_range, c->initializer_range);
  auto missing = LoadTransformerConfig(dir.File("nope"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::models
