// DFlash speculative decoding over a Qwen3-MoE target (model_type qwen3_moe, the dense
// loader's family) on the CPU: LoadDecodeTarget picks the dense target for it; greedy
// speculative decoding at every block size gives exactly the target's own greedy tokens
// (each recomputed from an empty cache), and those tokens depend on the MoE blocks (zeroed
// experts, or a router whose rows are rotated, decode other tokens); sampled decoding is
// seeded; and `tandem eval`'s library call runs end to end on the committed tiny Qwen3-MoE
// checkpoint (tests/golden/qwen3_moe_tiny), batched too, with the same acceptance.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <string>
#include <vector>

#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_test_util.h"
#include "models/speculative/moe_decode_test_util.h"

namespace tandem::models {
namespace {

const std::string kTinyMoe = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_moe_tiny";

// `w` with every expert zeroed (the MoE blocks add nothing), or with each MoE layer's router
// rows rotated by one (every token routed to other experts).
using Variant = testing::MoeVariant;
testing::HostWeights Vary(testing::HostWeights w, const TransformerConfig& c, Variant v) {
  const int64_t e = c.moe->num_experts, h = c.hidden_size;
  for (auto& [name, values] : w) {
    if (v == Variant::kExpertsZeroed && name.find(".mlp.experts.") != std::string::npos)
      std::fill(values.begin(), values.end(), 0.f);
    if (v == Variant::kRouterRotated && name.ends_with(".mlp.gate.weight")) {
      EXPECT_EQ(static_cast<int64_t>(values.size()), e * h) << name;
      std::rotate(values.begin(), values.begin() + h, values.end());
    }
  }
  return w;
}

class Qwen3MoeDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A vocabulary of 6 so that a random drafter's guesses are sometimes right: blocks are
    // accepted whole, in part and not at all. Layers 0 and 2 are MoE layers, 1 dense.
    cfg_ = testing::TinyMoeConfig();
    cfg_.vocab_size = 6;
    ASSERT_TRUE(cfg_.IsMoeLayer(0) && !cfg_.IsMoeLayer(1) && cfg_.IsMoeLayer(2));
    weights_ = testing::RandomHostWeights(cfg_, 21);
    target_ = Load(Variant::kAsIs);
    ASSERT_NE(target_, nullptr);
    EXPECT_TRUE(target_->shape().moe);
    EXPECT_FALSE(target_->shape().hybrid);
    EXPECT_EQ(target_->shape().model_type, "qwen3_moe");
    auto d = DFlashDrafter::Create(testing::TinyDrafterForShape(target_->shape(), {0, 2}),
                                   {.max_tokens = 128, .num_blocks = 1},
                                   kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    drafter_ = std::move(*d);
    testing::RandomizeDrafter(*drafter_, 5);
  }

  // The target of weights_ (varied by `v`) written as a checkpoint and loaded by
  // LoadDecodeTarget, which picks the family from config.json.
  std::unique_ptr<DecodeTarget> Load(Variant v) {
    dirs_.emplace_back();
    const std::string dir = dirs_.back().path();
    EXPECT_TRUE(testing::WriteCheckpoint(dir, cfg_, Vary(weights_, cfg_, v)).ok());
    auto t = LoadDecodeTarget(dir, kernels::HostAllocator(),
                              {.max_tokens = 128, .capacity = 128, .max_rollback = 16});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }

  TransformerConfig cfg_;
  testing::HostWeights weights_;
  std::list<testing::ScratchDir> dirs_;
  std::unique_ptr<DecodeTarget> target_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

TEST_F(Qwen3MoeDecodeTest, GreedySpeculativeDecodingIsLossless) {
  testing::ExpectMoeGreedyLossless(std::move(target_), drafter_.get(),
                                   [this](Variant v) { return Load(v); }, "a crop inside a block");
}

TEST_F(Qwen3MoeDecodeTest, SampledDecodingIsSeeded) {
  auto decoder = DFlashDecoder::Create(std::move(target_), drafter_.get(), 128);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  testing::ExpectSampledIsSeeded(**decoder, {3, 1, 1, 4}, cfg_.vocab_size);
}

TEST(MoeEval, RunsEndToEndOnTheTinyQwen3MoeCheckpoint) {
  auto shape = ReadDecodeTargetShape(kTinyMoe);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->model_type, "qwen3_moe");
  EXPECT_TRUE(shape->moe);
  EXPECT_FALSE(shape->hybrid);
  EXPECT_EQ(shape->num_hidden_layers, 4);
  const testing::ScratchDir scratch;  // unique per process: see the CMakeLists' shared-TMPDIR run
  SpecEvalRequest q = testing::TinyEvalRequest(
      kTinyMoe, testing::TinyDrafterForShape(*shape, {1, 3}), scratch.path(), 511);
  auto r = RunSpecEval(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompts_skipped, 1);
  EXPECT_EQ(r->run.generated_tokens, 24);
  EXPECT_GE(r->run.tau, 1.0);
  EXPECT_LE(r->run.tau, 16.0);
  EXPECT_EQ(r->baseline.prompts, 2);
  EXPECT_EQ(r->baseline.tau, 1.0);
  EXPECT_NE(FormatSpecEvalReport(*r).find("tau"), std::string::npos);

  // Batched decoding drives the dense loader's targets, MoE ones too: two prompts per
  // forward accept exactly as one at a time (the CPU computes every row alone).
  SpecEvalRequest batched = q;
  batched.batch = 2;
  auto b = RunSpecEval(batched);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->batch, 2);
  EXPECT_EQ(b->run.generated_tokens, 24);
  EXPECT_EQ(b->run.verify_steps, r->run.verify_steps);
  EXPECT_DOUBLE_EQ(b->run.tau, r->run.tau);

  // The sampled run is seeded: the same seed gives the same acceptance, batched or not.
  q.temperature = 0.8f;
  q.seed = 5;
  batched.temperature = 0.8f;
  batched.seed = 5;
  auto s1 = RunSpecEval(q), s2 = RunSpecEval(batched);
  ASSERT_TRUE(s1.ok() && s2.ok()) << s1.status().ToString() << " " << s2.status().ToString();
  EXPECT_EQ(s1->sampled.prompts, 2);
  EXPECT_EQ(s1->sampled.verify_steps, s2->sampled.verify_steps);
  EXPECT_DOUBLE_EQ(s1->sampled.tau, s2->sampled.tau);
}

}  // namespace
}  // namespace tandem::models
