// Official-layout FP8 checkpoints: F8_E4M3 / F8_E5M2 read by the safetensors reader, a
// weight dequantized with its 128x128 `*_scale_inv`, scales that do not match their weight
// refused naming the tensor, and config.json's quantization_config accepted only in the
// layout tandem implements.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include "kernels/gemm/fp8_format.h"
#include "models/io/fp8_checkpoint.h"
#include "models/io/hf_config.h"
#include "models/io/model_test_util.h"
#include "models/io/safetensors_writer.h"
#include "models/io/weight_spec.h"

namespace tandem::models {
namespace {

using kernels::bf16;

struct Fp8File {
  std::vector<uint8_t> q;
  std::vector<float> s;
};

// w: e4m3 [n, k] with codes (r + c) % 120 (finite, varied); scales 2^(block index).
Status WriteFp8(const std::string& path, int64_t n, int64_t k, std::vector<int64_t> scale_shape,
                Fp8File* f) {
  f->q.resize(n * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) f->q[r * k + c] = static_cast<uint8_t>((r + c) % 120);
  int64_t ns = 1;
  for (int64_t d : scale_shape) ns *= d;
  f->s.resize(ns);
  for (int64_t i = 0; i < ns; ++i) f->s[i] = std::ldexp(1.f, static_cast<int>(i % 7) - 3);
  std::vector<TensorToWrite> ts = {
      {"layer.weight", kernels::DType::kF8E4M3, {n, k}, std::as_bytes(std::span<const uint8_t>(f->q))},
      {"layer.weight_scale_inv", kernels::DType::kF32, scale_shape,
       std::as_bytes(std::span<const float>(f->s))}};
  return WriteSafetensors(path, ts);
}

TEST(Fp8Checkpoint, ReadsAndDequantizesBlocks) {
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/w.safetensors";
  const int64_t n = 130, k = 300;  // partial blocks in both dimensions: scales [2, 3]
  Fp8File f;
  ASSERT_TRUE(WriteFp8(path, n, k, {2, 3}, &f).ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const TensorInfo* t = reader->Find("layer.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, kernels::DType::kF8E4M3);
  ASSERT_TRUE(CheckFp8BlockWeight(*reader, *t).ok());
  std::vector<bf16> out(n * k);
  ASSERT_TRUE(DequantizeFp8BlockWeight(*reader, *t, reader->Bytes(*t), out).ok());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float want = kernels::E4m3ToFloat(f.q[r * k + c]) * f.s[(r / 128) * 3 + c / 128];
      ASSERT_EQ(out[r * k + c].f(), bf16(want).f()) << r << "," << c;
    }
}

TEST(Fp8Checkpoint, RefusesScalesThatDoNotMatch) {
  testing::ScratchDir dir;
  Fp8File f;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 2}, {3, 3}, {6}}) {
    const std::string path = dir.path() + "/bad.safetensors";
    ASSERT_TRUE(WriteFp8(path, 130, 300, shape, &f).ok());
    auto reader = SafetensorsReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    Status st = CheckFp8BlockWeight(*reader, *reader->Find("layer.weight"));
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("layer.weight_scale_inv"), std::string::npos) << st.ToString();
  }
  // No scale tensor at all.
  const std::string path = dir.path() + "/noscale.safetensors";
  std::vector<uint8_t> q(16 * 16, 0x38);
  std::vector<TensorToWrite> ts = {{"layer.weight", kernels::DType::kF8E4M3, {16, 16},
                                    std::as_bytes(std::span<const uint8_t>(q))}};
  ASSERT_TRUE(WriteSafetensors(path, ts).ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  Status st = CheckFp8BlockWeight(*reader, *reader->Find("layer.weight"));
  EXPECT_NE(st.ToString().find("layer.weight_scale_inv"), std::string::npos) << st.ToString();
}

TEST(Fp8Checkpoint, ConfigQuantizationLayouts) {
  nlohmann::json base = {{"model_type", "qwen3"}, {"vocab_size", 32}, {"hidden_size", 8},
                         {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                         {"num_key_value_heads", 1}, {"head_dim", 4}, {"intermediate_size", 12},
                         {"max_position_embeddings", 64}, {"rope_theta", 10000}};
  auto ok = ParseTransformerConfig(base, "c");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE(ok->fp8_block_weights);
  nlohmann::json j = base;
  j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"},
                              {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  auto fp8 = ParseTransformerConfig(j, "c");
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  EXPECT_TRUE(fp8->fp8_block_weights);
  for (auto [key, value] : {std::pair<const char*, nlohmann::json>{"weight_block_size", {64, 64}},
                            {"quant_method", "awq"},
                            {"activation_scheme", "static"},
                            {"fmt", "e5m2"}}) {
    nlohmann::json bad = j;
    bad["quantization_config"][key] = value;
    Status st = ParseTransformerConfig(bad, "c").status();
    EXPECT_FALSE(st.ok()) << key;
    EXPECT_NE(st.ToString().find("quantization_config"), std::string::npos) << st.ToString();
  }
}

TEST(Fp8Checkpoint, Fp8WeightsNeedTheQuantizationConfig) {
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/w.safetensors";
  Fp8File f;
  ASSERT_TRUE(WriteFp8(path, 130, 300, {2, 3}, &f).ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  const std::vector<WeightSpec> specs = {{"layer.weight", {130, 300}}};
  EXPECT_FALSE(CheckWeights(*reader, specs, false).ok());
  EXPECT_TRUE(CheckWeights(*reader, specs, true).ok());
}

}  // namespace
}  // namespace tandem::models
