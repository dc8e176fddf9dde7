// DFlash2 drafter config: parsing a config shaped like the released DFlash2 checkpoints, the
// key-naming rejections, and the refusal of a DFlash2 config wherever a DFlash drafter is
// read (jobs' init_from, checkpoint resume, tandem eval all go through ParseDFlashConfig).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "models/dflash/dflash2_config.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// Shaped like a DFlash2 drafter for a Qwen3-4B target (5 layers, block 8, two taps, groups
// of 16 channels, rank 256, top 16), shrunk to hidden 48 where the shape does not matter.
json DFlash2Json() {
  return json::parse(R"({
    "architectures": ["DFlash2DraftModel"],
    "block_size": 8,
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33],
                      "block_size": 8, "conv_kernel_size": 2, "conv_group_size": 16,
                      "selector_rank": 256, "selector_top_k": 16},
    "head_dim": 16,
    "hidden_act": "silu",
    "hidden_size": 48,
    "intermediate_size": 96,
    "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention",
                    "full_attention"],
    "max_position_embeddings": 40960,
    "model_type": "qwen3",
    "num_attention_heads": 4,
    "num_hidden_layers": 5,
    "num_key_value_heads": 2,
    "num_target_layers": 36,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000,
    "tie_word_embeddings": false,
    "vocab_size": 151936
  })");
}

std::string Error(const json& j) {
  Result<DFlash2Config> c = ParseDFlash2Config(j, "d2/config.json");
  return c.ok() ? "accepted" : c.status().message();
}

TEST(DFlash2ConfigTest, ParsesTheDFlash2Keys) {
  Result<DFlash2Config> c = ParseDFlash2Config(DFlash2Json(), "d2/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->base.block_size, 8);
  EXPECT_EQ(c->base.mask_token_id, 151669);
  EXPECT_EQ(c->base.layers.hidden_size, 48);
  EXPECT_EQ(c->conv_kernel_size, 2);
  EXPECT_EQ(c->conv_group_size, 16);
  EXPECT_EQ(c->selector_rank, 256);
  EXPECT_EQ(c->selector_top_k, 16);
  EXPECT_EQ(c->output_multiplier, 1.0);
  EXPECT_EQ(c->input_embedding_scale, 1.0);
  EXPECT_FALSE(c->final_logit_softcapping);
}

TEST(DFlash2ConfigTest, ScalesFromDFlashConfigOrTopLevel) {
  json j = DFlash2Json();
  j["dflash_config"]["output_multiplier"] = 0.5;
  j["final_logit_softcapping"] = 30.0;
  j["input_embedding_scale"] = 8;
  Result<DFlash2Config> c = ParseDFlash2Config(j, "d2/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->output_multiplier, 0.5);
  EXPECT_EQ(c->final_logit_softcapping, 30.0);
  EXPECT_EQ(c->input_embedding_scale, 8.0);
  j["final_logit_softcapping"] = 0;  // 0: no cap, as the reference reads it
  c = ParseDFlash2Config(j, "d2/config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->final_logit_softcapping);
  // Top-level keys are read too; the same key in both places must agree.
  json k = DFlash2Json();
  k["dflash_config"].erase("selector_rank");
  k["selector_rank"] = 64;
  c = ParseDFlash2Config(k, "d2/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->selector_rank, 64);
  k["dflash_config"]["selector_rank"] = 128;
  EXPECT_NE(Error(k).find("'dflash_config.selector_rank': 128 disagrees"), std::string::npos)
      << Error(k);
}

TEST(DFlash2ConfigTest, MissingKeysAreNamed) {
  for (const char* key : {"conv_kernel_size", "conv_group_size", "selector_rank",
                          "selector_top_k"}) {
    json j = DFlash2Json();
    j["dflash_config"].erase(key);
    const std::string e = Error(j);
    EXPECT_NE(e.find(std::string("key 'dflash_config.") + key + "': missing"), std::string::npos)
        << e;
    EXPECT_NE(e.find("d2/config.json"), std::string::npos) << e;
  }
}

TEST(DFlash2ConfigTest, WrongValuesAreNamed) {
  auto with = [](const char* key, json v) {
    json j = DFlash2Json();
    j["dflash_config"][key] = v;
    return Error(j);
  };
  std::string e = with("conv_group_size", 20);  // 48 % 20 != 0
  EXPECT_NE(e.find("'dflash_config.conv_group_size': 20 does not divide hidden_size 48"),
            std::string::npos) << e;
  e = with("conv_kernel_size", 0);
  EXPECT_NE(e.find("'dflash_config.conv_kernel_size': expected a positive integer"),
            std::string::npos) << e;
  e = with("selector_top_k", 200000);
  EXPECT_NE(e.find("'dflash_config.selector_top_k': 200000 exceeds vocab_size"),
            std::string::npos) << e;
  e = with("selector_rank", "256");
  EXPECT_NE(e.find("'dflash_config.selector_rank'"), std::string::npos) << e;
  e = with("output_multiplier", -1.0);
  EXPECT_NE(e.find("'output_multiplier'"), std::string::npos) << e;
  e = with("final_logit_softcapping", -5.0);
  EXPECT_NE(e.find("'final_logit_softcapping'"), std::string::npos) << e;
  e = with("drafter_type", "dflash");
  EXPECT_NE(e.find("'dflash_config.drafter_type'"), std::string::npos) << e;
  json j = DFlash2Json();
  j["architectures"] = {"DFlashDraftModel"};
  e = Error(j);
  EXPECT_NE(e.find("key 'architectures'"), std::string::npos) << e;
}

// A DFlash2 config where a DFlash drafter is read: refused with the reason, never read as
// DFlash without its convolutions and selector.
TEST(DFlash2ConfigTest, DFlashReadersRefuseDFlash2) {
  const std::string dir = ::testing::TempDir() + "/dflash2_drafter";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << DFlash2Json().dump(2);
  Result<DFlashConfig> c = LoadDFlashConfig(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("DFlash2 training and decoding are not implemented yet"),
            std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(dir + "/config.json"), std::string::npos);
  EXPECT_TRUE(LoadDFlash2Config(dir).ok());

  // Named by drafter_type alone: refused the same way.
  json j = DFlash2Json();
  j["architectures"] = {"DFlashDraftModel"};
  j["drafter_type"] = "dflash2";
  c = ParseDFlashConfig(j, "d/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not implemented yet"), std::string::npos);
  // A DFlash config carrying a DFlash2-only key: refused, naming the key.
  j.erase("drafter_type");
  c = ParseDFlashConfig(j, "d/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("key 'dflash_config.conv_kernel_size'"), std::string::npos)
      << c.status().message();
  // Without the DFlash2 keys it is an ordinary DFlash config.
  for (const char* key : {"conv_kernel_size", "conv_group_size", "selector_rank",
                          "selector_top_k"})
    j["dflash_config"].erase(key);
  EXPECT_TRUE(ParseDFlashConfig(j, "d/config.json").ok());
}

}  // namespace
}  // namespace tandem::models
