// DFlash drafter config: the target-layer rule, parsing a z-lab style config, writing and
// reading back, and rejections.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/dflash/dflash_config.h"
#include "models/io/model_test_util.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// Shaped like z-lab's Qwen3-8B DFlash drafter config (5 layers, block 16).
constexpr const char* kDrafter = R"({
  "architectures": ["DFlashDraftModel"],
  "attention_bias": false,
  "block_size": 16,
  "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
  "dtype": "bfloat16",
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "intermediate_size": 12288,
  "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention",
                  "full_attention"],
  "max_position_embeddings": 40960,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 5,
  "num_key_value_heads": 8,
  "num_target_layers": 36,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

TEST(DFlashConfigTest, TargetLayerRule) {
  EXPECT_EQ(DFlashTargetLayerIds(36, 5), (std::vector<int64_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(DFlashTargetLayerIds(28, 5), (std::vector<int64_t>{1, 7, 13, 19, 25}));
  EXPECT_EQ(DFlashTargetLayerIds(64, 5), (std::vector<int64_t>{1, 16, 31, 46, 61}));
  EXPECT_EQ(DFlashTargetLayerIds(36, 1), (std::vector<int64_t>{18}));
  EXPECT_EQ(DFlashTargetLayerIds(36, 2), (std::vector<int64_t>{1, 33}));
  // Halves round to even as in Python: n=27, k=3 -> 1 + 11.5 = 12.5 -> 12.
  EXPECT_EQ(DFlashTargetLayerIds(27, 3), (std::vector<int64_t>{1, 12, 24}));
  // n=29, k=3 -> 1 + 12.5 = 13.5 -> 14.
  EXPECT_EQ(DFlashTargetLayerIds(29, 3), (std::vector<int64_t>{1, 14, 26}));
}

TEST(DFlashConfigTest, ParsesZLabStyleConfig) {
  auto c = ParseDFlashConfigText(kDrafter, "drafter/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->block_size, 16);
  EXPECT_EQ(c->mask_token_id, 151669);
  EXPECT_EQ(c->target_layer_ids, DFlashTargetLayerIds(36, 5));
  EXPECT_EQ(c->num_target_layers, 36);
  EXPECT_EQ(c->layers.num_hidden_layers, 5);
  EXPECT_EQ(c->layers.hidden_size, 4096);
  EXPECT_TRUE(c->layers.qk_norm);
}

TEST(DFlashConfigTest, BlockSizeInsideDflashConfig) {
  json j = json::parse(kDrafter);
  j.erase("block_size");
  j["dflash_config"]["block_size"] = 8;
  auto c = ParseDFlashConfig(j, "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->block_size, 8);
  j["block_size"] = 16;  // disagreeing copies
  EXPECT_FALSE(ParseDFlashConfig(j, "x").ok());
}

TEST(DFlashConfigTest, WriteThenReadWithSlidingLayers) {
  auto c = ParseDFlashConfigText(kDrafter, "x");
  ASSERT_TRUE(c.ok());
  c->layers.layer_types[1] = LayerType::kSlidingAttention;
  c->layers.layer_types[3] = LayerType::kSlidingAttention;
  c->layers.sliding_window = 2048;
  testing::ScratchDir dir;
  ASSERT_TRUE(WriteDFlashConfig(dir.File("config.json"), *c).ok());
  json written = json::parse(testing::ReadRaw(dir.File("config.json")));
  EXPECT_EQ(written["architectures"], json::array({"DFlashDraftModel"}));
  EXPECT_EQ(written["dflash_config"]["target_layer_ids"], json::array({1, 9, 17, 25, 33}));
  EXPECT_EQ(written["use_sliding_window"], true);
  EXPECT_EQ(written["layer_types"][1], "sliding_attention");
  auto back = LoadDFlashConfig(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->layers.layer_types, c->layers.layer_types);
  EXPECT_EQ(back->layers.sliding_window, 2048);
  EXPECT_EQ(back->mask_token_id, c->mask_token_id);
  EXPECT_EQ(back->block_size, c->block_size);
  EXPECT_EQ(back->num_target_layers, 36);
}

void ExpectRejected(const json& j, const std::string& key) {
  auto c = ParseDFlashConfig(j, "d/config.json");
  ASSERT_FALSE(c.ok()) << key;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("d/config.json"), std::string::npos);
  EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
}

TEST(DFlashConfigTest, Rejections) {
  const json base = json::parse(kDrafter);
  json j = base;
  j["architectures"] = {"Qwen3ForCausalLM"};
  ExpectRejected(j, "architectures");
  j = base;
  j.erase("dflash_config");
  ExpectRejected(j, "dflash_config");
  j = base;
  j["dflash_config"]["mask_token_id"] = 151936;
  ExpectRejected(j, "mask_token_id");
  j = base;
  j["dflash_config"]["target_layer_ids"] = {1, 9, 40};
  ExpectRejected(j, "target_layer_ids");
  j = base;
  j["dflash_config"]["target_layer_ids"] = {9, 1};
  ExpectRejected(j, "target_layer_ids");
  j = base;
  j["block_size"] = 1;
  ExpectRejected(j, "block_size");
  j = base;
  j.erase("block_size");
  ExpectRejected(j, "block_size");
  j = base;
  j["model_type"] = "llama";
  ExpectRejected(j, "model_type");
}

// is_causal as z-lab's loader reads it: absent, each layer's own rule; present, every layer.
// Written back only when the config had it, so an export reproduces the training mask.
TEST(DFlashConfigTest, IsCausalOverridesEveryLayerAndRoundTrips) {
  json j = json::parse(kDrafter);
  j["layer_types"][0] = "sliding_attention";
  j["sliding_window"] = 2048;
  j["use_sliding_window"] = true;
  for (const json& value : {json(), json(true), json(false)}) {
    SCOPED_TRACE(value.dump());
    json in = j;
    if (!value.is_null()) in["is_causal"] = value;
    auto c = ParseDFlashConfig(in, "d/config.json");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->is_causal.has_value(), !value.is_null());
    for (int64_t l = 0; l < 5; ++l) {
      const bool per_layer = l == 0;  // only layer 0 is sliding
      EXPECT_EQ(DFlashLayerCausal(*c, l), value.is_null() ? per_layer : value.get<bool>())
          << "layer " << l;
    }
    testing::ScratchDir dir;
    ASSERT_TRUE(WriteDFlashConfig(dir.File("config.json"), *c).ok());
    const json written = json::parse(testing::ReadRaw(dir.File("config.json")));
    EXPECT_EQ(written.contains("is_causal"), !value.is_null());
    if (!value.is_null()) EXPECT_EQ(written["is_causal"], value);
    auto back = LoadDFlashConfig(dir.path());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->is_causal, c->is_causal);
  }
}

// Masks the block attention cannot train, or that servers would read differently, are
// refused naming the key.
TEST(DFlashConfigTest, IsCausalRejections) {
  json j = json::parse(kDrafter);
  j["is_causal"] = "no";
  ExpectRejected(j, "is_causal");
  // Bidirectional sliding layers with a window shorter than the block.
  j = json::parse(kDrafter);
  j["layer_types"][0] = "sliding_attention";
  j["sliding_window"] = 8;
  j["use_sliding_window"] = true;
  j["is_causal"] = false;
  ExpectRejected(j, "is_causal");
  j["sliding_window"] = 16;  // every block key within reach: accepted
  EXPECT_TRUE(ParseDFlashConfig(j, "x").ok());
  j["sliding_window"] = 8;
  j["is_causal"] = true;  // causal: the window only bounds earlier keys, as trained
  EXPECT_TRUE(ParseDFlashConfig(j, "x").ok());
  // dflash_config.causal, which vLLM reads when is_causal is absent, must repeat is_causal.
  j = json::parse(kDrafter);
  j["dflash_config"]["causal"] = false;
  ExpectRejected(j, "dflash_config.causal");
  j["is_causal"] = true;
  ExpectRejected(j, "dflash_config.causal");
  j["is_causal"] = false;
  EXPECT_TRUE(ParseDFlashConfig(j, "x").ok());
}

}  // namespace
}  // namespace tandem::models
