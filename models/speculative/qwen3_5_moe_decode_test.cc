// DFlash speculative decoding over the mixture-of-experts Qwen3.5 / 3.6 hybrid (model_type
// qwen3_5_moe, wrapper, and qwen3_5_moe_text, text-only) on the CPU: LoadDecodeTarget picks
// the hybrid target for both layouts; greedy speculative decoding at every block size gives
// exactly the target's own greedy tokens (each recomputed from an empty cache, so the
// DeltaNet rollback of a partly accepted block is checked against no rollback at all), and
// those tokens depend on the MoE blocks (zeroed routed experts, or a router whose rows are
// rotated, decode other tokens); sampled decoding is seeded; `tandem eval`'s library call runs
// end to end on the committed tiny checkpoint (tests/golden/qwen3_5_moe_tiny, the wrapper)
// and on a text-only one written to a scratch directory; batched decoding is refused naming
// the model_type; and a model_type of neither family is refused naming the key.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <list>
#include <string>
#include <vector>

#include "models/io/model_test_util.h"
#include "models/qwen3_5/qwen3_5_moe_test_util.h"
#include "models/speculative/moe_decode_test_util.h"

namespace tandem::models {
namespace {

using nlohmann::json;

const std::string kTinyMoe = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_moe_tiny";

// `w` with every routed expert zeroed (the shared expert stays), or with each layer's router
// rows rotated by one (every token routed to other experts).
using Variant = testing::MoeVariant;
testing::HostCheckpoint Vary(testing::HostCheckpoint w, Variant v) {
  for (auto& [name, t] : w) {
    if (v == Variant::kExpertsZeroed && name.find(".mlp.experts.") != std::string::npos)
      std::fill(t.values.begin(), t.values.end(), kernels::bf16(0.f));
    if (v == Variant::kRouterRotated && name.ends_with(".mlp.gate.weight"))
      std::rotate(t.values.begin(), t.values.begin() + t.shape[1], t.values.end());
  }
  return w;
}

class Qwen35MoeDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The tiny text-only MoE hybrid (3 DeltaNet layers, then gated attention; 6 experts,
    // top-2, a shared expert) with a vocabulary of 6, so that a random drafter's guesses are
    // sometimes right: blocks are accepted whole, in part (a replay of several tokens) and
    // not at all.
    config_ = testing::TinyMoeText();
    config_["vocab_size"] = 6;
    auto cfg = ParseQwen35Config(config_, "tiny moe");
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    weights_ = testing::RandomCheckpoint(*cfg, 21);
    target_ = Load(Variant::kAsIs);
    ASSERT_NE(target_, nullptr);
    EXPECT_TRUE(target_->shape().moe);
    EXPECT_TRUE(target_->shape().hybrid);
    EXPECT_EQ(target_->shape().model_type, "qwen3_5_moe_text");
    auto d = DFlashDrafter::Create(testing::TinyDrafterForShape(target_->shape(), {1, 3}),
                                   {.max_tokens = 128, .num_blocks = 1},
                                   kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    drafter_ = std::move(*d);
    testing::RandomizeDrafter(*drafter_, 5);
  }

  // weights_ (varied by `v`) written as a checkpoint and loaded by LoadDecodeTarget, which
  // picks the family from config.json; rollback data for the drafter's block of 16.
  std::unique_ptr<DecodeTarget> Load(Variant v) {
    dirs_.emplace_back();
    const std::string dir = dirs_.back().path();
    testing::WriteCheckpoint(dir, config_, Vary(weights_, v));
    auto t = LoadDecodeTarget(dir, kernels::HostAllocator(),
                              {.max_tokens = 128, .capacity = 128, .max_rollback = 16});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }

  json config_;
  testing::HostCheckpoint weights_;
  std::list<testing::ScratchDir> dirs_;
  std::unique_ptr<DecodeTarget> target_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

TEST_F(Qwen35MoeDecodeTest, GreedySpeculativeDecodingIsLossless) {
  testing::ExpectMoeGreedyLossless(std::move(target_), drafter_.get(),
                                   [this](Variant v) { return Load(v); }, "the multi-token DeltaNet replay");
}

TEST_F(Qwen35MoeDecodeTest, SampledDecodingIsSeeded) {
  auto decoder = DFlashDecoder::Create(std::move(target_), drafter_.get(), 128);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  testing::ExpectSampledIsSeeded(**decoder, {3, 1, 1, 4}, 6);
}

// The committed wrapper checkpoint (text weights under model.language_model.).
TEST(MoeEval, RunsEndToEndOnTheTinyQwen35MoeCheckpoint) {
  auto shape = ReadDecodeTargetShape(kTinyMoe);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->model_type, "qwen3_5_moe");
  EXPECT_TRUE(shape->moe);
  EXPECT_TRUE(shape->hybrid);
  EXPECT_EQ(shape->num_hidden_layers, 4);
  EXPECT_EQ(shape->eos_token_ids, std::vector<int64_t>{2});
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
  q.temperature = 0.8f;
  q.seed = 5;
  auto s1 = RunSpecEval(q), s2 = RunSpecEval(q);
  ASSERT_TRUE(s1.ok() && s2.ok()) << s1.status().ToString() << " " << s2.status().ToString();
  EXPECT_EQ(s1->sampled.prompts, 2);
  EXPECT_EQ(s1->sampled.verify_steps, s2->sampled.verify_steps);
  EXPECT_DOUBLE_EQ(s1->sampled.tau, s2->sampled.tau);

  // Batched decoding drives the dense loader's targets only: refused naming the model_type.
  q.batch = 2;
  const Status b = RunSpecEval(q).status();
  EXPECT_NE(b.ToString().find("is the Qwen3.5 / 3.6 hybrid (model_type qwen3_5_moe)"),
            std::string::npos)
      << b.ToString();
}

// The text-only layout (model_type qwen3_5_moe_text, weights under model.) written to a
// scratch directory.
TEST(MoeEval, RunsEndToEndOnATextOnlyQwen35MoeCheckpoint) {
  const testing::ScratchDir scratch;
  const std::string target = scratch.path() + "/target";
  std::filesystem::create_directories(target);
  testing::WriteCheckpoint(target, testing::TinyMoeText(),
                           testing::RandomCheckpoint(testing::TinyHybridMoeConfig(), 3));
  auto shape = ReadDecodeTargetShape(target);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->model_type, "qwen3_5_moe_text");
  EXPECT_TRUE(shape->moe && shape->hybrid);
  SpecEvalRequest q = testing::TinyEvalRequest(
      target, testing::TinyDrafterForShape(*shape, {0, 3}), scratch.path(), 95);
  auto r = RunSpecEval(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompts_skipped, 1);
  EXPECT_EQ(r->run.generated_tokens, 24);
  EXPECT_GE(r->run.tau, 1.0);
  EXPECT_EQ(r->baseline.tau, 1.0);
}

// Mixture-of-experts model_types of neither family are refused before any weights are read,
// naming the file, the key and what is supported.
TEST(MoeEval, RefusesOtherMixtureOfExpertsModelTypes) {
  EXPECT_EQ(DecodeFamilyOf("qwen3_moe"), DecodeFamily::kDense);
  for (const char* t : {"qwen3_5_moe", "qwen3_5_moe_text"})
    EXPECT_EQ(DecodeFamilyOf(t), DecodeFamily::kHybrid) << t;
  const testing::ScratchDir scratch;
  for (const char* t : {"mixtral", "qwen2_moe", "qwen3_next", "qwen3_5_moe_vision"}) {
    EXPECT_EQ(DecodeFamilyOf(t), DecodeFamily::kUnsupported) << t;
    std::ofstream(scratch.path() + "/config.json")
        << json{{"model_type", t}, {"hidden_size", 8}}.dump();
    for (const Status& s :
         {ReadDecodeTargetShape(scratch.path()).status(),
          LoadDecodeTarget(scratch.path(), kernels::HostAllocator(), {}).status()}) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << t;
      EXPECT_NE(s.ToString().find(fmt::format("config.json: key 'model_type': '{}'", t)),
                std::string::npos)
          << s.ToString();
      EXPECT_NE(s.ToString().find("qwen3_moe"), std::string::npos) << s.ToString();
      EXPECT_NE(s.ToString().find("qwen3_5_moe_text"), std::string::npos) << s.ToString();
    }
  }
}

}  // namespace
}  // namespace tandem::models
