// Qwen3.5 config.json parsing: the golden tiny wrapper, a 27B-shaped wrapper, the text-only
// layout, and every refusal naming the file and the key.
#include "models/qwen3_5/qwen3_5_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tandem::models {
namespace {

using json = nlohmann::json;

// The text_config of the Qwen3.5/3.6-27B checkpoints (the fields their config.json carries).
json Text27B() {
  return json::parse(R"({
    "model_type": "qwen3_5_text", "attention_bias": false, "attn_output_gate": true,
    "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 17408,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 48, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": false, "num_attention_heads": 24,
    "num_hidden_layers": 64, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "vocab_size": 248320,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10],
                        "rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25}})");
}

json Wrapper(json text) {
  json j = {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
            {"model_type", "qwen3_5"},
            {"tie_word_embeddings", false},
            {"vision_config", {{"depth", 27}, {"hidden_size", 1152}}}};
  j["text_config"] = std::move(text);
  return j;
}

std::string ErrorOf(const json& j) {
  Result<Qwen35Config> c = ParseQwen35Config(j, "/m/config.json");
  return c.ok() ? std::string("OK") : c.status().message();
}

TEST(Qwen35ConfigTest, GoldenTinyWrapper) {
  Result<Qwen35Config> c =
      LoadQwen35Config(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_tiny");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "qwen3_5");
  EXPECT_EQ(c->weight_prefix, "model.language_model.");
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_hidden_layers, 8);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rotary_dim, 8);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->linear_num_key_heads, 2);
  EXPECT_EQ(c->linear_num_value_heads, 4);
  EXPECT_EQ(c->conv_dim(), 2 * 2 * 16 + 4 * 16);
  ASSERT_EQ(c->layer_types.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(c->layer_types[i] == HybridLayerType::kFullAttention, i == 3 || i == 7) << i;
}

TEST(Qwen35ConfigTest, Wrapper27BShape) {
  Result<Qwen35Config> c = ParseQwen35Config(Wrapper(Text27B()), "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rotary_dim, 64);
  EXPECT_EQ(c->rope_theta, 1e7);
  EXPECT_EQ(c->conv_dim(), 10240);
  EXPECT_EQ(c->linear_value_dim(), 6144);
  EXPECT_EQ(c->q_dim(), 6144);
  EXPECT_EQ(c->vocab_size, 248320);
  EXPECT_EQ(c->layer_types[62], HybridLayerType::kLinearAttention);
  EXPECT_EQ(c->layer_types[63], HybridLayerType::kFullAttention);
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{248044});
  EXPECT_FALSE(c->initializer_range.has_value());
  json ranged = Wrapper(Text27B());  // random weights' head spread (RandomHeadBound)
  ranged["text_config"]["initializer_range"] = 0.02;
  c = ParseQwen35Config(ranged, "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->initializer_range, 0.02);
  ranged["text_config"]["initializer_range"] = 0;
  EXPECT_NE(ErrorOf(ranged).find("'initializer_range': must be positive"), std::string::npos)
      << ErrorOf(ranged);
  json listed = Wrapper(Text27B());  // a list at the top when text_config has none
  listed["text_config"].erase("eos_token_id");
  listed["eos_token_id"] = {7, 9};
  c = ParseQwen35Config(listed, "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{7, 9}));
  listed["eos_token_id"] = "x";
  EXPECT_NE(ErrorOf(listed).find("key 'eos_token_id': expected token ids"), std::string::npos)
      << ErrorOf(listed);
}

TEST(Qwen35ConfigTest, TextOnlyAndIntervalWithoutLayerTypes) {
  json j = Text27B();
  j["architectures"] = {"Qwen3_5ForCausalLM"};
  j["num_hidden_layers"] = 6;
  j["full_attention_interval"] = 3;
  Result<Qwen35Config> c = ParseQwen35Config(j, "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->weight_prefix, "model.");
  ASSERT_EQ(c->layer_types.size(), 6u);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(c->layer_types[i] == HybridLayerType::kFullAttention, i == 2 || i == 5) << i;
}

// The official FP8 checkpoints (Qwen3.6-27B-FP8): quantization_config at the wrapper's top
// level, e4m3 weights with 128x128 blocks; Qwen35Weights::Load then dequantizes them.
TEST(Qwen35ConfigTest, Fp8CheckpointConfig) {
  json fp8 = Wrapper(Text27B());
  fp8["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {128, 128}}};
  auto c = ParseQwen35Config(fp8, "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->fp8_block_weights);
  auto plain = ParseQwen35Config(Wrapper(Text27B()), "/m/config.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->fp8_block_weights);
}

TEST(Qwen35ConfigTest, RefusesWhatIsNotImplemented) {
  struct Case {
    const char* what;
    json config;
    const char* expect;  // a part of the message
  };
  auto text_with = [](const char* key, json value) {
    json t = Text27B();
    t[key] = std::move(value);
    return Wrapper(t);
  };
  auto rope_with = [](const char* key, json value) {
    json t = Text27B();
    t["rope_parameters"][key] = std::move(value);
    return Wrapper(t);
  };
  json types = json::array();
  for (int i = 0; i < 64; ++i) types.push_back((i + 1) % 4 ? "linear_attention" : "full_attention");
  json bad_types = types;
  bad_types[5] = "sliding_attention";
  json swapped = types;
  swapped[2] = "full_attention";
  json no_text = Wrapper(Text27B());
  no_text.erase("text_config");
  json missing = Text27B();
  missing.erase("linear_num_value_heads");
  json moe = Wrapper(Text27B());
  moe["model_type"] = "qwen3_5_moe";
  // Quantized checkpoints other than the FP8 block layout (Fp8CheckpointConfig below).
  json awq = Wrapper(Text27B());
  awq["quantization_config"] = {{"quant_method", "awq"}};
  const Case cases[] = {
      {"moe type", moe, "is not qwen3_5_moe_text"},
      {"experts", text_with("num_experts", 256), "'text_config.num_experts'"},
      {"awq checkpoint", awq, "key 'quantization_config': quant_method \"awq\" is not supported"},
      {"per-tensor fp8", text_with("quantization_config", {{"quant_method", "fp8"}}),
       "text_config: key 'quantization_config': weight_block_size missing"},
      {"layer type", text_with("layer_types", bad_types), "layer 5 is \"sliding_attention\""},
      {"interval", text_with("layer_types", swapped), "full_attention_interval is 4"},
      {"rope type", rope_with("rope_type", "yarn"), "rope type \"yarn\""},
      {"rope field", rope_with("factor", 4.0), "field 'factor'"},
      {"odd rotary", rope_with("partial_rotary_factor", 0.2), "partial_rotary_factor"},
      {"activation", text_with("hidden_act", "gelu"), "'text_config.hidden_act'"},
      {"bias", text_with("attention_bias", true), "attention biases"},
      {"no gate", text_with("attn_output_gate", false), "ungated"},
      {"gqa", text_with("linear_num_key_heads", 5), "does not divide"},
      {"no text", no_text, "'text_config'"},
      {"missing", Wrapper(missing), "'text_config.linear_num_value_heads': missing"},
      {"dense qwen3", json{{"model_type", "qwen3"}}, "not a Qwen3.5 hybrid"},
  };
  for (const Case& c : cases) {
    const std::string msg = ErrorOf(c.config);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find("/m/config.json"), std::string::npos) << c.what << ": " << msg;
  }
}

}  // namespace
}  // namespace tandem::models
