// CPU tests of DFlash speculative decoding: lossless under greedy (the tokens are the
// target's own greedy continuation whatever the drafter proposes), accept-length
// bookkeeping, stop tokens, limits and refusals of mismatched drafters; above temperature 0
// speculative sampling: seeded, greedy in the limit, and the target's distribution.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/speculative/decode_test_util.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/speculative/dflash_decoder.h"
#include "models/speculative/spec_pick_test_util.h"

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
  for (auto [top_p, top_k] : {std::pair<float, int64_t>{1.0f, 0}, {0.9f, 0}, {1.0f, 8}}) {
    o.top_p = top_p;
    o.top_k = top_k;
    o.seed = 42;
    auto a = decoder_->Generate(prompt, o);
    auto b = decoder_->Generate(prompt, o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->tokens, b->tokens);
    EXPECT_EQ(a->accept_lengths, b->accept_lengths);
    o.seed = 43;
    auto c = decoder_->Generate(prompt, o);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(a->tokens, c->tokens);  // 20 draws over 67 ids: equal only by a ~0 chance
    o.seed = 42;
    o.prompt_index = 1;  // another prompt's draws
    auto d = decoder_->Generate(prompt, o);
    o.prompt_index = 0;
    ASSERT_TRUE(d.ok());
    EXPECT_NE(a->tokens, d->tokens);
    for (int32_t t : a->tokens) EXPECT_LT(t, 67);
  }
}

// As the temperature goes to 0 the filtered distributions become one-hot at the argmax, and
// speculative sampling becomes greedy matching: the same tokens and accept lengths.
TEST_F(DFlashDecoderTest, SamplingNearTemperatureZeroIsTheGreedyPath) {
  const std::vector<int32_t> prompt = Prompt(9, 3, 66);
  SpecDecodeOptions o;
  o.max_new_tokens = 40;
  auto greedy = decoder_->Generate(prompt, o);
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  o.temperature = 1e-4f;
  o.seed = 77;
  auto cold = decoder_->Generate(prompt, o);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->tokens, greedy->tokens);
  EXPECT_EQ(cold->accept_lengths, greedy->accept_lengths);
  // The check has teeth only if drafts get accepted.
  EXPECT_GT(*std::max_element(greedy->accept_lengths.begin(), greedy->accept_lengths.end()), 1);
}

// The statistical test of the decoder's speculative sampling with the tiny target and drafter:
// over seeded trials (one prompt index each) the first token a verify step yields follows the
// target's filtered distribution, marginalised over the prefill's pick t1:
// m(x) = sum_t1 p(t1 | prompt) p(x | prompt, t1). Emitting the drafter's proposal unchecked
// ("always accept") fails this by far.
TEST_F(DFlashDecoderTest, FirstVerifiedTokenFollowsTheTargetsFilteredDistribution) {
  const SamplingParams sp{.temperature = 2.0f, .top_p = 0.9f, .top_k = 30};
  const std::vector<int32_t> prompt = Prompt(5, 8, 66);
  const int64_t v = pair_.target_config.vocab_size;
  auto target = MakeDecodeTarget(pair_.target.get(), 32, nullptr);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto logits = kernels::Tensor::Empty(kernels::HostAllocator(), kernels::DType::kF32, {1, v},
                                       nullptr);
  ASSERT_TRUE(logits.ok());
  auto dist = [&](const std::vector<int32_t>& tokens) {
    const std::span<const int32_t> all(tokens);
    EXPECT_TRUE((*target)->Reset().ok());
    const Status head = (*target)->Extend(all.first(all.size() - 1), {}, {});
    EXPECT_TRUE(head.ok()) << head.ToString();
    const Status last = (*target)->Extend(all.last(1), {}, logits->view());
    EXPECT_TRUE(last.ok()) << last.ToString();
    return FilterLogits(logits->view().data_as<float>(), v, sp);
  };
  const TokenDist first = dist(prompt);
  std::vector<double> m(static_cast<size_t>(v), 0.0);
  for (size_t i = 0; i < first.ids.size(); ++i) {
    std::vector<int32_t> longer = prompt;
    longer.push_back(first.ids[i]);
    const TokenDist next = dist(longer);
    for (size_t j = 0; j < next.ids.size(); ++j) m[next.ids[j]] += first.probs[i] * next.probs[j];
  }
  TokenDist want;
  for (int32_t id = 0; id < v; ++id)
    if (m[id] > 0) {
      want.ids.push_back(id);
      want.probs.push_back(m[id]);
    }
  SpecDecodeOptions o;
  o.max_new_tokens = 2;
  o.block_size = 2;
  o.temperature = sp.temperature;
  o.top_p = sp.top_p;
  o.top_k = sp.top_k;
  o.seed = 2024;
  // Drafts sampled from q, and the drafter's argmax with q one-hot (sample_drafts = false).
  for (bool sample_drafts : {true, false}) {
    SCOPED_TRACE(sample_drafts ? "sampled drafts" : "greedy drafts");
    o.sample_drafts = sample_drafts;
    std::vector<int64_t> counts(static_cast<size_t>(v), 0);
    int64_t accepted = 0;
    const int trials = 3000;
    for (int i = 0; i < trials; ++i) {
      o.prompt_index = static_cast<uint64_t>(i);
      auto r = decoder_->Generate(prompt, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->tokens.size(), 2u);
      ++counts[r->tokens[1]];
      accepted += r->accept_lengths[0] - 1;
    }
    const testing::ChiSquareResult fit = testing::ChiSquareTest(counts, want);
    EXPECT_GT(fit.p_value, 1e-6) << "chi-square " << fit.chi2 << " df " << fit.df;
    EXPECT_GE(fit.df, 5);
    std::printf("first verified token (%s drafts): chi-square %.2f, df %d, p-value %.3g; %ld of "
                "%d drafts kept\n", sample_drafts ? "sampled" : "greedy", fit.chi2, fit.df,
                fit.p_value, static_cast<long>(accepted), trials);
    // Both branches ran: some drafts were kept (few greedy ones: the random drafter's argmax
    // is rarely likely under the target), some rejected.
    EXPECT_GT(accepted, sample_drafts ? trials / 20 : 5);
    EXPECT_LT(accepted, trials - trials / 20);
  }
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
