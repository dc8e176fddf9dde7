// Weight specs of a causal LM against checkpoints made by the writer; and, when the goldens
// from tests/golden/make_qwen3_golden.py (or the 8B-shaped model of make_qwen3_8b_shaped.py,
// via TANDEM_QWEN3_8B_SHAPED_DIR) are present, the same checks on checkpoints written by
// transformers' save_pretrained — tandem's reader against HF's writer.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/io/model_test_util.h"
#include "models/io/safetensors_writer.h"
#include "models/io/weight_spec.h"

namespace tandem::models {
namespace {

TransformerConfig TinyQwen3() {
  auto c = ParseTransformerConfigText(R"({
    "model_type": "qwen3", "vocab_size": 32, "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
    "intermediate_size": 12, "max_position_embeddings": 64, "rope_theta": 10000})", "tiny");
  TANDEM_CHECK_OK(c.status());
  return *c;
}

Status WriteCheckpoint(const std::string& path, const std::vector<WeightSpec>& specs,
                       std::vector<std::vector<uint16_t>>* storage) {
  std::vector<TensorToWrite> ts;
  storage->clear();
  storage->reserve(specs.size());
  for (const WeightSpec& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    storage->emplace_back(n, uint16_t{0x3f80});  // bf16 1.0
    ts.push_back({s.name, DType::kBF16, s.shape,
                  std::as_bytes(std::span<const uint16_t>(storage->back()))});
  }
  return WriteSafetensors(path, ts);
}

TEST(WeightSpecTest, Qwen3HasQkNormsLlamaDoesNot) {
  TransformerConfig c = TinyQwen3();
  auto specs = CausalLmWeightSpecs(c);
  // embed + 2 layers * 11 + norm + lm_head
  EXPECT_EQ(specs.size(), 1u + 2 * 11 + 1 + 1);
  EXPECT_EQ(specs[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(specs[3].shape, (std::vector<int64_t>{4, 8}));  // k_proj: 1 KV head of 4
  c.qk_norm = false;
  c.tie_word_embeddings = true;
  EXPECT_EQ(CausalLmWeightSpecs(c).size(), 1u + 2 * 9 + 1);
}

TEST(WeightSpecTest, ChecksACheckpoint) {
  testing::ScratchDir dir;
  auto specs = CausalLmWeightSpecs(TinyQwen3());
  std::vector<std::vector<uint16_t>> storage;
  ASSERT_TRUE(WriteCheckpoint(dir.File("ok.safetensors"), specs, &storage).ok());
  auto r = SafetensorsReader::Open(dir.File("ok.safetensors"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(CheckWeights(*r, specs).ok());

  auto wrong = specs;
  wrong[5].shape = {8, 9};
  ASSERT_TRUE(WriteCheckpoint(dir.File("bad.safetensors"), wrong, &storage).ok());
  r = SafetensorsReader::Open(dir.File("bad.safetensors"));
  ASSERT_TRUE(r.ok());
  Status st = CheckWeights(*r, specs);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(specs[5].name), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bad.safetensors"), std::string::npos) << st.message();

  auto missing = specs;
  missing.pop_back();
  ASSERT_TRUE(WriteCheckpoint(dir.File("short.safetensors"), missing, &storage).ok());
  r = SafetensorsReader::Open(dir.File("short.safetensors"));
  ASSERT_TRUE(r.ok());
  st = CheckWeights(*r, specs);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("lm_head.weight"), std::string::npos) << st.message();
}

// A directory written by save_pretrained plus its golden file: the config, every weight,
// and the golden layout (versioned header, packed batch, captured layers) must all check.
void CheckHfModelAndGolden(const std::string& model_dir, const std::string& golden,
                           const std::vector<int64_t>& layers) {
  auto config = LoadTransformerConfig(model_dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto weights = SafetensorsReader::Open(model_dir);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  Status st = CheckWeights(*weights, CausalLmWeightSpecs(*config));
  EXPECT_TRUE(st.ok()) << st.ToString();

  auto g = SafetensorsReader::Open(golden);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->metadata().at("format"), "tandem-golden");
  EXPECT_EQ(g->metadata().at("version"), "1");
  auto capture = nlohmann::json::parse(g->metadata().at("capture_layers"));
  EXPECT_EQ(capture.get<std::vector<int64_t>>(), layers);
  const TensorInfo* ids = g->Find("input_ids");
  const TensorInfo* cu = g->Find("cu_seqlens");
  ASSERT_NE(ids, nullptr);
  ASSERT_NE(cu, nullptr);
  EXPECT_EQ(ids->dtype, DType::kI32);
  const int64_t t = ids->numel();
  std::vector<int32_t> cuv(cu->numel());
  ASSERT_TRUE(g->Read(*cu, DType::kI32, cuv.data(), cu->nbytes()).ok());
  EXPECT_EQ(cuv.front(), 0);
  EXPECT_EQ(cuv.back(), t);
  for (int64_t i : layers) {
    const TensorInfo* h = g->Find(fmt::format("hidden.{}", i));
    ASSERT_NE(h, nullptr) << i;
    EXPECT_EQ(h->shape, (std::vector<int64_t>{t, config->hidden_size}));
    EXPECT_EQ(h->dtype, DType::kF32);
  }
}

TEST(HfCheckpointTest, TinyQwen3GoldenFromTransformers) {
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/golden";
  if (!std::filesystem::exists(dir + "/qwen3_tiny_golden.safetensors")) {
    GTEST_SKIP() << "run tests/golden/make_qwen3_golden.py to create the goldens";
  }
  CheckHfModelAndGolden(dir + "/qwen3_tiny", dir + "/qwen3_tiny_golden.safetensors",
                        {0, 1, 2, 3});
}

TEST(HfCheckpointTest, Qwen3_8BShapedFromTransformers) {
  const char* dir = std::getenv("TANDEM_QWEN3_8B_SHAPED_DIR");
  if (dir == nullptr) GTEST_SKIP() << "set TANDEM_QWEN3_8B_SHAPED_DIR (make_qwen3_8b_shaped.py)";
  auto weights = SafetensorsReader::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_GT(weights->files().size(), 1u) << "expected a sharded checkpoint";
  CheckHfModelAndGolden(dir, std::string(dir) + "/golden_hidden.safetensors",
                        {1, 9, 17, 25, 33});  // the DFlash rule for 36 layers
}

}  // namespace
}  // namespace tandem::models
