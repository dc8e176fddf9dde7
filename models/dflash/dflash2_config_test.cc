// DFlash2 drafter config: parsing a config shaped like the released DFlash2 checkpoints, the
// key-naming rejections, and reading one wherever a drafter is read (jobs' init_from,
// checkpoint resume and tandem eval all go through ParseDFlashConfig), plus the export.
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
  Result<DFlashConfig> c = ParseDFlash2Config(j, "d2/config.json");
  return c.ok() ? "accepted" : c.status().message();
}

TEST(DFlash2ConfigTest, ParsesTheDFlash2Keys) {
  Result<DFlashConfig> c = ParseDFlash2Config(DFlash2Json(), "d2/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->block_size, 8);
  EXPECT_EQ(c->mask_token_id, 151669);
  EXPECT_EQ(c->layers.hidden_size, 48);
  EXPECT_EQ(c->dflash2->conv_kernel_size, 2);
  EXPECT_EQ(c->dflash2->conv_group_size, 16);
  EXPECT_EQ(c->dflash2->selector_rank, 256);
  EXPECT_EQ(c->dflash2->selector_top_k, 16);
  EXPECT_EQ(c->dflash2->output_multiplier, 1.0);
  EXPECT_EQ(c->dflash2->input_embedding_scale, 1.0);
  EXPECT_FALSE(c->dflash2->final_logit_softcapping);
}

TEST(DFlash2ConfigTest, ScalesFromDFlashConfigOrTopLevel) {
  json j = DFlash2Json();
  j["dflash_config"]["output_multiplier"] = 0.5;
  j["final_logit_softcapping"] = 30.0;
  j["input_embedding_scale"] = 8;
  Result<DFlashConfig> c = ParseDFlash2Config(j, "d2/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dflash2->output_multiplier, 0.5);
  EXPECT_EQ(c->dflash2->final_logit_softcapping, 30.0);
  EXPECT_EQ(c->dflash2->input_embedding_scale, 8.0);
  j["final_logit_softcapping"] = 0;  // 0: no cap, as the reference reads it
  c = ParseDFlash2Config(j, "d2/config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->dflash2->final_logit_softcapping);
  // Top-level keys are read too; the same key in both places must agree.
  json k = DFlash2Json();
  k["dflash_config"].erase("selector_rank");
  k["selector_rank"] = 64;
  c = ParseDFlash2Config(k, "d2/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dflash2->selector_rank, 64);
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

// A DFlash2 config where a drafter is read: read as DFlash2 (the extension set; without
// is_causal, full layers bidirectional by the per-layer rule), never as DFlash without its
// convolutions and selector; written back as the same config, is_causal only when set.
TEST(DFlash2ConfigTest, DFlashReadersReadDFlash2) {
  const std::string dir = ::testing::TempDir() + "/dflash2_drafter";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << DFlash2Json().dump(2);
  Result<DFlashConfig> c = LoadDFlashConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->dflash2.has_value());
  EXPECT_EQ(c->dflash2->selector_rank, 256);
  EXPECT_FALSE(c->is_causal.has_value());
  EXPECT_FALSE(DFlashLayerCausal(*c, 0));  // a full layer
  Result<DFlashConfig> d = LoadDFlash2Config(dir);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dflash2, c->dflash2);
  // Export: DFlash2DraftModel with its keys and no is_causal; read back the same.
  const json out = DFlashConfigToJson(*c);
  EXPECT_EQ(out["architectures"], json({"DFlash2DraftModel"}));
  EXPECT_FALSE(out.contains("is_causal"));
  EXPECT_EQ(out["dflash_config"]["conv_kernel_size"], 2);
  EXPECT_EQ(out["dflash_config"]["drafter_type"], "dflash2");
  Result<DFlashConfig> back = ParseDFlashConfig(out, "out/config.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->dflash2, c->dflash2);
  EXPECT_FALSE(back->is_causal.has_value());
  EXPECT_EQ(back->target_layer_ids, c->target_layer_ids);

  // Named by drafter_type alone: refused the same way.
  json j = DFlash2Json();
  j["architectures"] = {"DFlashDraftModel"};
  j["drafter_type"] = "dflash2";
  c = ParseDFlashConfig(j, "d/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("key 'architectures'"), std::string::npos);
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

// is_causal as z-lab's loader reads it for DFlash2: absent, a sliding layer is causal and a
// full one bidirectional; set, it applies to every layer and the export writes it back.
TEST(DFlash2ConfigTest, IsCausalFollowsThePerLayerRuleUnlessSet) {
  json j = DFlash2Json();
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                      "full_attention", "full_attention"};
  j["sliding_window"] = 64;
  j["use_sliding_window"] = true;
  Result<DFlashConfig> c = ParseDFlashConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(DFlashLayerCausal(*c, 0));
  EXPECT_FALSE(DFlashLayerCausal(*c, 1));
  EXPECT_FALSE(DFlashConfigToJson(*c).contains("is_causal"));
  j["is_causal"] = false;
  c = ParseDFlashConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (int64_t l = 0; l < 5; ++l) EXPECT_FALSE(DFlashLayerCausal(*c, l)) << l;
  EXPECT_EQ(DFlashConfigToJson(*c)["is_causal"], false);
}

}  // namespace
}  // namespace tandem::models
