// The fidelity golden's reader and its checks against a model: real safetensors files, with
// each way a golden can be wrong or made for another checkpoint.
#include "bench/fidelity_golden.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/io/safetensors_writer.h"

namespace tandem::bench {
namespace {

using kernels::DType;

// A golden of `docs` documents (their lengths), hidden width `h`, layers `layers`, and a
// logits tail `v` wide (0: none). Setters below break one thing at a time.
struct GoldenSpec {
  std::vector<int32_t> lengths = {9, 13};
  int64_t h = 6;
  std::vector<int> layers = {1, 3};
  int64_t v = 20;
  std::vector<int32_t> ids, pos, cu;

  void Fill() {
    ids.clear(), pos.clear(), cu = {0};
    for (int32_t len : lengths) {
      for (int32_t i = 0; i < len; ++i) {
        ids.push_back((i * 7 + 3) % 17);
        pos.push_back(i);
      }
      cu.push_back(cu.back() + len);
    }
  }
};

std::span<const std::byte> Bytes(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}

std::string Write(const GoldenSpec& s, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  const int64_t t = static_cast<int64_t>(s.ids.size());
  std::vector<float> hidden(static_cast<size_t>(t * s.h), 0.5f);
  const int64_t docs = static_cast<int64_t>(s.cu.size()) - 1;
  std::vector<float> tail(static_cast<size_t>(kFidelityTailRows * docs * s.v), 1.f);
  std::vector<models::TensorToWrite> w = {
      {"input_ids", DType::kI32, {static_cast<int64_t>(s.ids.size())},
       Bytes(s.ids.data(), s.ids.size() * 4)},
      {"position_ids", DType::kI32, {static_cast<int64_t>(s.pos.size())},
       Bytes(s.pos.data(), s.pos.size() * 4)},
      {"cu_seqlens", DType::kI32, {static_cast<int64_t>(s.cu.size())},
       Bytes(s.cu.data(), s.cu.size() * 4)}};
  for (int l : s.layers)
    w.push_back({"hidden." + std::to_string(l), DType::kF32, {t, s.h},
                 Bytes(hidden.data(), hidden.size() * 4)});
  if (s.v > 0)
    w.push_back({"logits_tail", DType::kF32, {kFidelityTailRows * docs, s.v},
                 Bytes(tail.data(), tail.size() * 4)});
  EXPECT_TRUE(models::WriteSafetensors(path, w, {}).ok());
  return path;
}

const FidelityModelShape kModel{"model/config.json", 6, 20, 4};

TEST(FidelityGoldenTest, ReadsAGoldenThatFitsItsModel) {
  GoldenSpec s;
  s.Fill();
  Result<FidelityGolden> g = ReadFidelityGolden(Write(s, "ok.safetensors"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tokens(), 22);
  EXPECT_EQ(g->documents(), 2);
  EXPECT_EQ(g->layers, (std::vector<int>{1, 3}));
  EXPECT_EQ(g->hidden_size, 6);
  EXPECT_EQ(g->vocab_size, 20);
  EXPECT_EQ(g->max_seqlen, 13);
  EXPECT_TRUE(CheckGoldenFitsModel(*g, kModel).ok());
}

TEST(FidelityGoldenTest, RefusesAGoldenMadeForAnotherModelNamingTheKey) {
  GoldenSpec s;
  s.Fill();
  Result<FidelityGolden> g = ReadFidelityGolden(Write(s, "other.safetensors"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto refused = [&](FidelityModelShape m, const char* key) {
    Status st = CheckGoldenFitsModel(*g, m);
    ASSERT_FALSE(st.ok()) << key;
    EXPECT_NE(st.ToString().find(key), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("model/config.json"), std::string::npos) << st.ToString();
  };
  FidelityModelShape m = kModel;
  m.hidden_size = 8;
  refused(m, "hidden_size");
  m = kModel;
  m.vocab_size = 32;
  refused(m, "vocab_size");
  m = kModel;
  m.num_hidden_layers = 3;  // hidden.3 needs 4 layers
  refused(m, "num_hidden_layers");
  m = kModel;
  m.vocab_size = 20;
  GoldenSpec no_tail = s;
  no_tail.v = 0;
  Result<FidelityGolden> g2 = ReadFidelityGolden(Write(no_tail, "no_tail.safetensors"));
  ASSERT_TRUE(g2.ok());
  m.vocab_size = 10;  // input ids reach 15; no logits_tail to compare
  Status st = CheckGoldenFitsModel(*g2, m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("input_ids"), std::string::npos) << st.ToString();
}

TEST(FidelityGoldenTest, RefusesADocumentShorterThanTheLogitsTail) {
  GoldenSpec s;
  s.lengths = {9, 7};
  s.Fill();
  Result<FidelityGolden> g = ReadFidelityGolden(Write(s, "short.safetensors"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().ToString().find("document 1"), std::string::npos)
      << g.status().ToString();
  EXPECT_NE(g.status().ToString().find("logits tail"), std::string::npos);
}

TEST(FidelityGoldenTest, RefusesABrokenPackedBatch) {
  GoldenSpec s;
  s.Fill();
  GoldenSpec bad_cu = s;
  bad_cu.cu.back() += 1;
  Result<FidelityGolden> g = ReadFidelityGolden(Write(bad_cu, "cu.safetensors"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().ToString().find("cu_seqlens"), std::string::npos);

  GoldenSpec bad_pos = s;
  bad_pos.pos[10] = 0;  // document 1 restarts at 9: token 1 of it claims position 0
  g = ReadFidelityGolden(Write(bad_pos, "pos.safetensors"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().ToString().find("position_ids`[10]"), std::string::npos)
      << g.status().ToString();

  GoldenSpec no_layers = s;
  no_layers.layers.clear();
  g = ReadFidelityGolden(Write(no_layers, "none.safetensors"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().ToString().find("hidden."), std::string::npos);

  g = ReadFidelityGolden(::testing::TempDir() + "/missing.safetensors");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().ToString().find("missing.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace tandem::bench
