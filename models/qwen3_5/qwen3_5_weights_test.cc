// Qwen35Weights::Random and Qwen35Head (the embedding and LM head alone) on the CPU: the
// head loaded from the committed tiny checkpoint equals the whole model's; the random head
// equals the random model's bit for bit; random weights are deterministic per seed, differ
// across seeds, and lie in their documented ranges; a forward over them is finite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_test_util.h"
#include "models/qwen3_5/qwen3_5_weights.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::TensorView;
using testing::kDir;

bool SameBytes(const TensorView& a, const TensorView& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::vector<float> Floats(const TensorView& t) {
  std::vector<float> out;
  const bf16* p = t.data_as<bf16>();
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(p[i].f());
  return out;
}

TEST(Qwen35WeightsTest, HeadLoadsTheCheckpointsEmbeddingAndLmHead) {
  auto config = LoadQwen35Config(kDir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto reader = SafetensorsReader::Open(kDir);
  ASSERT_TRUE(reader.ok());
  auto whole = Qwen35Weights::Load(*config, *reader, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto head = Qwen35Head::Load(kDir, *config, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_TRUE(SameBytes(head->embed(), whole->embed()));
  EXPECT_TRUE(SameBytes(head->lm_head(), whole->lm_head()));
  EXPECT_FALSE(SameBytes(head->embed(), head->lm_head()));  // untied in this checkpoint
  auto missing = Qwen35Head::Load("/nonexistent/qwen", *config, kernels::HostAllocator(), nullptr);
  EXPECT_FALSE(missing.ok());
}

TEST(Qwen35WeightsTest, RandomWeightsAreSeededRangedAndMatchTheRandomHead) {
  auto config = LoadQwen35Config(kDir);
  ASSERT_TRUE(config.ok());
  auto a = Qwen35Weights::Random(*config, kernels::HostAllocator(), 5, nullptr);
  auto b = Qwen35Weights::Random(*config, kernels::HostAllocator(), 5, nullptr);
  auto c = Qwen35Weights::Random(*config, kernels::HostAllocator(), 6, nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().ToString();
  const Qwen35LayerWeights& l0 = a->layers()[0];
  EXPECT_TRUE(SameBytes(l0.linear.in_proj, b->layers()[0].linear.in_proj));
  EXPECT_FALSE(SameBytes(l0.linear.in_proj, c->layers()[0].linear.in_proj));
  auto head = Qwen35Head::Random(*config, kernels::HostAllocator(), 5, nullptr);
  ASSERT_TRUE(head.ok());
  EXPECT_TRUE(SameBytes(head->embed(), a->embed()));
  EXPECT_TRUE(SameBytes(head->lm_head(), a->lm_head()));
  const float in_bound = 1.f / std::sqrt(static_cast<float>(config->hidden_size)) * 1.01f;
  for (float x : Floats(l0.linear.in_proj)) ASSERT_LE(std::abs(x), in_bound);
  for (float x : Floats(l0.input_norm)) ASSERT_LE(std::abs(x), 0.101f);  // zero-centred
  for (float x : Floats(l0.linear.norm)) ASSERT_TRUE(x >= 0.79f && x <= 1.21f);
  for (float x : Floats(l0.linear.a_log)) ASSERT_TRUE(x >= 0.f && x <= 1.01f);
  // A forward over random weights stays finite.
  auto target = Qwen35Target::Create(std::move(a).value(), {64, nullptr});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  // What validation counts is what Create allocated (on the CPU: no chunked-rule scratch).
  EXPECT_EQ((*target)->workspace_bytes(), Qwen35Target::WorkspaceBytes(*config, 64, false));
  EXPECT_LT(Qwen35Target::WorkspaceBytes(*config, 64, false),
            Qwen35Target::WorkspaceBytes(*config, 128, false));
  std::vector<int32_t> ids(40), pos(40), cu = {0, 27, 40};
  for (int i = 0; i < 40; ++i) {
    ids[i] = (i * 37) % static_cast<int>(config->vocab_size);
    pos[i] = i < 27 ? i : i - 27;
  }
  std::vector<bf16> out(40 * config->hidden_size);
  const HybridBatch batch{TensorView(ids.data(), DType::kI32, {40}),
                          TensorView(pos.data(), DType::kI32, {40}),
                          TensorView(cu.data(), DType::kI32, {3}), 0};
  const HybridCapture cap{7, TensorView(out.data(), DType::kBF16, {40, config->hidden_size})};
  const Status st = (*target)->Forward(batch, {&cap, 1});
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const bf16& x : out) ASSERT_TRUE(std::isfinite(x.f()));
}

}  // namespace
}  // namespace tandem::models
