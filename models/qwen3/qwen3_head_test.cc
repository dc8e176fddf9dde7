// Qwen3Head: the embedding and LM head alone equal those of the whole model, loaded from
// the same checkpoint (with fp32 tensors converted) or made randomly from the same seed,
// tied and untied; a checkpoint without the LM head is refused naming it.
#include "models/qwen3/qwen3_head.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/dtype.h"
#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_test_util.h"
#include "models/qwen3/qwen3_weights.h"

namespace tandem::models {
namespace {

using testing::ScratchDir;

bool SameBytes(kernels::TensorView a, kernels::TensorView b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

class Qwen3HeadTest : public ::testing::TestWithParam<bool> {};  // tied

TEST_P(Qwen3HeadTest, RandomHeadIsTheRandomModelsHead) {
  const TransformerConfig cfg = testing::TinyConfig(false, GetParam());
  auto whole = Qwen3Weights::Random(cfg, kernels::HostAllocator(), 11, nullptr);
  auto head = Qwen3Head::Random(cfg, kernels::HostAllocator(), 11, nullptr);
  ASSERT_TRUE(whole.ok() && head.ok()) << head.status().ToString();
  EXPECT_TRUE(SameBytes(head->embed(), whole->embed()));
  EXPECT_TRUE(SameBytes(head->lm_head(), whole->lm_head()));
  EXPECT_EQ(GetParam(), head->embed().data() == head->lm_head().data());
  auto other = Qwen3Head::Random(cfg, kernels::HostAllocator(), 12, nullptr);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(SameBytes(other->embed(), whole->embed()));  // the seed matters
}

TEST_P(Qwen3HeadTest, LoadedHeadIsTheLoadedModelsHead) {
  const TransformerConfig cfg = testing::TinyConfig(false, GetParam());
  ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, testing::RandomHostWeights(cfg, 5)).ok());
  auto reader = SafetensorsReader::Open(dir.path());
  ASSERT_TRUE(reader.ok());
  auto whole = Qwen3Weights::Load(cfg, *reader, kernels::HostAllocator(), nullptr);
  auto head = Qwen3Head::Load(dir.path(), cfg, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(whole.ok() && head.ok()) << head.status().ToString();
  EXPECT_TRUE(SameBytes(head->embed(), whole->embed()));
  EXPECT_TRUE(SameBytes(head->lm_head(), whole->lm_head()));
  EXPECT_LT(head->nbytes(), whole->nbytes());
}

// initializer_range sets the random embedding and LM head spread (uniform, std = range);
// the other weights are those of the config without it, bit for bit.
TEST_P(Qwen3HeadTest, InitializerRangeSetsTheRandomHeadSpread) {
  const TransformerConfig plain = testing::TinyConfig(false, GetParam());
  TransformerConfig cfg = plain;
  cfg.initializer_range = 0.02;
  auto whole = Qwen3Weights::Random(cfg, kernels::HostAllocator(), 11, nullptr);
  auto base = Qwen3Weights::Random(plain, kernels::HostAllocator(), 11, nullptr);
  auto head = Qwen3Head::Random(cfg, kernels::HostAllocator(), 11, nullptr);
  ASSERT_TRUE(whole.ok() && base.ok() && head.ok()) << head.status().ToString();
  EXPECT_TRUE(SameBytes(head->lm_head(), whole->lm_head()));
  EXPECT_FALSE(SameBytes(base->lm_head(), whole->lm_head()));
  EXPECT_TRUE(SameBytes(base->layers()[0].q_proj, whole->layers()[0].q_proj));
  for (const kernels::TensorView m : {whole->embed(), whole->lm_head()}) {
    const auto* bits = static_cast<const uint16_t*>(m.data());
    double sq = 0, max_abs = 0;
    for (int64_t i = 0; i < m.numel(); ++i) {
      const float x = kernels::bf16::ToFloat(bits[i]);
      sq += double{x} * x;
      max_abs = std::max(max_abs, double{std::fabs(x)});
    }
    EXPECT_LE(max_abs, 0.02 * 1.7320508 * 1.004);  // the bound, and bf16's rounding
    EXPECT_NEAR(std::sqrt(sq / m.numel()), 0.02, 0.002) << m.numel() << " values";
  }
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntied, Qwen3HeadTest, ::testing::Bool());

TEST(Qwen3HeadLoadTest, MissingLmHeadIsNamed) {
  const TransformerConfig untied = testing::TinyConfig(false, false);
  ScratchDir dir;
  // A tied checkpoint has no lm_head.weight; read as untied, the head is missing.
  const TransformerConfig tied = testing::TinyConfig(false, true);
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), tied, testing::RandomHostWeights(tied, 5)).ok());
  auto head = Qwen3Head::Load(dir.path(), untied, kernels::HostAllocator(), nullptr);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("lm_head.weight"), std::string::npos)
      << head.status().ToString();
}

}  // namespace
}  // namespace tandem::models
