// Qwen3Head: the embedding and LM head alone equal those of the whole model, loaded from
// the same checkpoint (with fp32 tensors converted) or made randomly from the same seed,
// tied and untied; a checkpoint without the LM head is refused naming it.
#include "models/qwen3/qwen3_head.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

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
