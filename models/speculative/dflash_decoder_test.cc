// CPU tests of DFlash speculative decoding: lossless under greedy (the tokens are the
// target's own greedy continuation whatever the drafter proposes), accept-length
// bookkeeping, stop tokens, limits and refusals of mismatched drafters.
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/speculative/decode_test_util.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/speculative/dflash_decoder.h"

namespace tandem::models {
namespace {

std::vector<int32_t> Prompt(int n, uint32_t seed, int64_t vocab) {
  return testing::MakeBatch({n}, vocab, seed).ids;
}

class DFlashDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::MakeTinyPair(&pair_, 96, 5);
    auto d = DFlashDecoder::Create(pair_.target.get(), pair_.drafter.get(), 96);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    decoder_ = std::move(*d);
  }
  testing::TinyPair pair_;
  std::unique_ptr<DFlashDecoder> decoder_;
};

TEST_F(DFlashDecoderTest, GreedyIsLosslessAtEveryBlockSize) {
  const std::vector<int32_t> prompt = Prompt(9, 3, 66);
  SpecDecodeOptions o;
  o.max_new_tokens = 40;
  o.block_size = 1;
  auto base = decoder_->Generate(prompt, o);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_EQ(base->tokens.size(), 40u);
  EXPECT_EQ(base->accept_lengths, std::vector<int32_t>(39, 1));  // 1 prefill pick + 39 steps
  for (int64_t b : {2, 5, 16}) {
    o.block_size = b;
    auto r = decoder_->Generate(prompt, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tokens, base->tokens) << "block size " << b;
    // Every step commits accept_length tokens (the last one may be cut at max_new_tokens).
    const int64_t committed =
        1 + std::accumulate(r->accept_lengths.begin(), r->accept_lengths.end(), int64_t{0});
    EXPECT_GE(committed, 40);
    EXPECT_LT(committed - r->accept_lengths.back(), 40);
    for (int32_t len : r->accept_lengths) {
      EXPECT_GE(len, 1);
      EXPECT_LE(len, b);
    }
  }
}

// CUDA runs the drafter with kDrafterBlocksCuda blocks (padding after the first): the same
// drafts, so the same accept lengths, as with one block. The trained golden drafter is used
// so that most drafts are accepted and a changed draft would show.
TEST(DFlashDecoderPadding, PaddingBlocksChangeNothing) {
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/dflash_decode_tiny/";
  auto target = Qwen3Target::Load(dir + "target", kernels::HostAllocator(), {.max_tokens = 64});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto config = LoadDFlashConfig(dir + "drafter");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::vector<std::vector<int32_t>> accepts;
  for (int64_t nb : {int64_t{1}, kDrafterBlocksCuda}) {
    auto drafter = DFlashDrafter::Create(*config, {.max_tokens = 96, .num_blocks = nb},
                                         kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(drafter.ok());
    ASSERT_TRUE(LoadDFlashWeights(dir + "drafter", **drafter).ok());
    auto d = DFlashDecoder::Create(target->get(), drafter->get(), 96);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    SpecDecodeOptions o;
    o.max_new_tokens = 40;
    auto r = (*d)->Generate(std::vector<int32_t>{34, 27, 31, 40, 7, 37, 55, 24}, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    accepts.push_back(r->accept_lengths);
  }
  EXPECT_EQ(accepts[0], accepts[1]);
  EXPECT_LT(accepts[0].size(), 20u);  // drafts are accepted: far fewer steps than tokens
}

TEST_F(DFlashDecoderTest, StopsAtStopTokenAndIsRepeatable) {
  const std::vector<int32_t> prompt = Prompt(6, 8, 66);
  SpecDecodeOptions o;
  o.max_new_tokens = 30;
  auto full = decoder_->Generate(prompt, o);
  ASSERT_TRUE(full.ok());
  o.stop_token_ids = {full->tokens[7]};
  auto cut = decoder_->Generate(prompt, o);
  ASSERT_TRUE(cut.ok());
  // Ends at the first occurrence of the stop token, inclusive.
  size_t first = 0;
  while (full->tokens[first] != full->tokens[7]) ++first;
  EXPECT_EQ(cut->tokens, std::vector<int32_t>(full->tokens.begin(),
                                              full->tokens.begin() + first + 1));
}

TEST_F(DFlashDecoderTest, SampledDecodingIsSeededAndStaysInVocab) {
  const std::vector<int32_t> prompt = Prompt(5, 4, 66);
  SpecDecodeOptions o;
  o.max_new_tokens = 20;
  o.temperature = 1.0f;
  o.seed = 42;
  auto a = decoder_->Generate(prompt, o);
  auto b = decoder_->Generate(prompt, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  o.seed = 43;
  auto c = decoder_->Generate(prompt, o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->tokens, c->tokens);  // 20 draws over 67 ids: equal only by a ~0 chance
  for (int32_t t : a->tokens) EXPECT_LT(t, 67);
}

TEST_F(DFlashDecoderTest, RefusesBadRequests) {
  SpecDecodeOptions o;
  o.max_new_tokens = 80;
  Status s = decoder_->Generate(Prompt(10, 1, 66), o).status();
  EXPECT_NE(s.ToString().find("exceed the context limit 96"), std::string::npos) << s.ToString();
  o.max_new_tokens = 4;
  s = decoder_->Generate(std::vector<int32_t>{}, o).status();
  EXPECT_NE(s.ToString().find("empty prompt"), std::string::npos) << s.ToString();
  s = decoder_->Generate(std::vector<int32_t>{1, 70}, o).status();
  EXPECT_NE(s.ToString().find("prompt token 1 is id 70"), std::string::npos) << s.ToString();
  o.block_size = 17;
  s = decoder_->Generate(Prompt(3, 1, 66), o).status();
  EXPECT_NE(s.ToString().find("block_size 17 not in [1, 16]"), std::string::npos)
      << s.ToString();
}

TEST(DrafterFitsTarget, NamesBothValues) {
  const TransformerConfig t = testing::TinyConfig(false, false);
  DFlashConfig d = testing::TinyDrafterFor(t);
  EXPECT_TRUE(CheckDrafterFitsTarget(d, t).ok());
  DFlashConfig bad = d;
  bad.layers.hidden_size = 32;
  EXPECT_NE(CheckDrafterFitsTarget(bad, t).ToString().find("hidden_size 32"), std::string::npos);
  EXPECT_NE(CheckDrafterFitsTarget(bad, t).ToString().find("target's 24"), std::string::npos);
  bad = d;
  bad.layers.vocab_size = 64;
  EXPECT_NE(CheckDrafterFitsTarget(bad, t).ToString().find("vocab_size 64 does not match the "
                                                            "target's 67"),
            std::string::npos);
  bad = d;
  bad.target_layer_ids = {0, 3};
  EXPECT_NE(CheckDrafterFitsTarget(bad, t).ToString().find("has 3, outside the target's layers "
                                                            "[0, 3)"),
            std::string::npos);
  bad = d;
  bad.num_target_layers = 36;
  EXPECT_NE(CheckDrafterFitsTarget(bad, t).ToString().find("num_target_layers 36"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::models
