// CPU tests of speculative decoding with a DFlash2 drafter (its drafts from the candidate
// selector, dflash2_proposal.h) over the tiny decode golden's target
// (tests/golden/dflash_decode_tiny): the golden's trained DFlash drafter made a fresh DFlash2
// drafter (its tensors copied by name; identity convolutions, zero successor codebook) gets
// its drafts accepted as the DFlash drafter does; with an active selector greedy decoding is
// still lossless (the target's own greedy tokens); sampling is seeded; the batched decoder
// gives each prompt what the one-prompt decoder gives it.
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/random/philox.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/speculative/dflash_batch_decoder.h"
#include "models/speculative/dflash_decoder.h"
#include "models/speculative/dflash2_proposal_test_util.h"

namespace tandem::models {
namespace {

const std::string kDir = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/dflash_decode_tiny/";
constexpr int64_t kMaxContext = 96;

// Prompts of the golden's prompts.jsonl.
const std::vector<std::vector<int32_t>> kPrompts = {
    {34, 27, 31, 40, 7, 37, 55, 24},       {37, 55, 24, 44, 10, 53, 39, 42, 49},
    {29, 14, 61, 8, 50, 1, 21, 38, 41, 25}, {1, 21, 38, 41, 25, 33, 43, 4, 57, 6, 3},
    {41, 25, 33, 43, 4, 57, 6, 3},         {62, 58, 16, 51, 59, 23, 29, 14, 61, 8}};

class DFlash2DecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto target = Qwen3Target::Load(kDir + "target", kernels::HostAllocator(), {.max_tokens = 64});
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    target_ = std::move(*target);
    auto config = LoadDFlashConfig(kDir + "drafter");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    dflash_ = NewDrafter(config_, 1);
    ASSERT_TRUE(dflash_);
    ASSERT_TRUE(LoadDFlashWeights(kDir + "drafter", *dflash_).ok());
  }
  static std::unique_ptr<DFlashDrafter> NewDrafter(const DFlashConfig& c, int64_t blocks) {
    auto d = DFlashDrafter::Create(c, {.max_tokens = blocks * kMaxContext, .num_blocks = blocks},
                                   kernels::HostAllocator(), nullptr);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(*d) : nullptr;
  }
  // A DFlash2 drafter with the golden DFlash drafter's tensors (by name), its own from the
  // fresh init (the successor codebook 0: the selector a no-op). selector > 0: both codebooks
  // uniform(-selector, selector) and the hidden projection uniform(-0.5, 0.5), pair terms of
  // the size of the golden's logit gaps (~10), so the selector moves drafts.
  std::unique_ptr<DFlashDrafter> NewDFlash2(int64_t blocks, float selector) {
    std::unique_ptr<DFlashDrafter> d = NewDrafter(testing::AsDFlash2(config_), blocks);
    if (!d) return nullptr;
    DFlashParams& p2 = d->params();
    testing::InitFromDFlash(dflash_->params(), p2);
    float* m2 = p2.master.view().data_as<float>();
    for (const DFlashParamSpec& s2 : p2.layout.specs) {
      const bool codebook = s2.name.ends_with("_codebook");
      if (selector > 0 && (codebook || s2.name.ends_with("hidden_projection.weight")))
        for (int64_t i = 0; i < s2.numel(); ++i)
          m2[s2.offset + i] = (codebook ? selector : 0.5f) *
                              (2 * kernels::PhiloxUniform(11, s2.offset, i) - 1);
    }
    EXPECT_TRUE(p2.SyncCompute(nullptr).ok());
    return d;
  }
  std::unique_ptr<DFlashDecoder> Decoder(DFlashDrafter* d) {
    auto dec = DFlashDecoder::Create(target_.get(), d, kMaxContext);
    EXPECT_TRUE(dec.ok()) << dec.status().ToString();
    return dec.ok() ? std::move(*dec) : nullptr;
  }
  static std::vector<SpecDecodeResult> DecodeAll(DFlashDecoder& d, SpecDecodeOptions o) {
    std::vector<SpecDecodeResult> out;
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      o.prompt_index = i;
      auto r = d.Generate(kPrompts[i], o);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      out.push_back(r.ok() ? *r : SpecDecodeResult());
    }
    return out;
  }
  static int64_t Steps(const std::vector<SpecDecodeResult>& rs) {
    int64_t n = 0;
    for (const auto& r : rs) n += static_cast<int64_t>(r.accept_lengths.size());
    return n;
  }
  static int64_t Committed(const std::vector<SpecDecodeResult>& rs) {
    int64_t n = 0;
    for (const auto& r : rs)
      n += std::accumulate(r.accept_lengths.begin(), r.accept_lengths.end(), int64_t{0});
    return n;
  }

  std::unique_ptr<Qwen3Target> target_;
  DFlashConfig config_;
  std::unique_ptr<DFlashDrafter> dflash_;
};

// The target's greedy continuation (block size 1: no drafts).
std::vector<std::vector<int32_t>> Tokens(const std::vector<SpecDecodeResult>& rs) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& r : rs) out.push_back(r.tokens);
  return out;
}

TEST_F(DFlash2DecodeTest, FreshSelectorDraftsAsTheDFlashDrafter) {
  SpecDecodeOptions o;
  o.max_new_tokens = 40;
  o.block_size = 1;
  auto plain = Decoder(dflash_.get());
  ASSERT_TRUE(plain);
  const auto baseline = DecodeAll(*plain, o);
  o.block_size = 16;
  const auto dflash = DecodeAll(*plain, o);
  auto d2 = NewDFlash2(1, 0.0f);
  ASSERT_TRUE(d2);
  auto dec = Decoder(d2.get());
  ASSERT_TRUE(dec);
  const auto dflash2 = DecodeAll(*dec, o);
  EXPECT_EQ(Tokens(dflash2), Tokens(baseline));
  EXPECT_EQ(Tokens(dflash), Tokens(baseline));
  // The selector is a no-op and the layers compute DFlash's (to bf16 rounding): the drafts
  // are the DFlash drafter's argmax, so about as many are accepted (near-ties may flip).
  const double mean2 = double(Committed(dflash2)) / double(Steps(dflash2));
  const double mean1 = double(Committed(dflash)) / double(Steps(dflash));
  EXPECT_GT(mean1, 1.5);
  EXPECT_NEAR(mean2, mean1, 0.25 * mean1) << "DFlash2 " << mean2 << ", DFlash " << mean1;
}

TEST_F(DFlash2DecodeTest, GreedyIsLosslessWithAnActiveSelector) {
  SpecDecodeOptions o;
  o.max_new_tokens = 40;
  o.block_size = 1;
  auto plain = Decoder(dflash_.get());
  ASSERT_TRUE(plain);
  const auto baseline = DecodeAll(*plain, o);
  auto fresh = NewDFlash2(1, 0.0f);
  auto active = NewDFlash2(1, 3.0f);
  ASSERT_TRUE(fresh && active);
  auto fresh_dec = Decoder(fresh.get());
  auto dec = Decoder(active.get());
  ASSERT_TRUE(fresh_dec && dec);
  for (int64_t b : {2, 7, 16}) {
    o.block_size = b;
    const auto got = DecodeAll(*dec, o);
    EXPECT_EQ(Tokens(got), Tokens(baseline)) << "block size " << b;
    for (const auto& r : got)
      for (int32_t len : r.accept_lengths) {
        EXPECT_GE(len, 1);
        EXPECT_LE(len, b);
      }
    // The selector moved drafts: the accept lengths differ from the no-op selector's.
    if (b == 16) {
      const auto no_op = DecodeAll(*fresh_dec, o);
      bool differ = false;
      for (size_t i = 0; i < got.size(); ++i)
        differ |= got[i].accept_lengths != no_op[i].accept_lengths;
      EXPECT_TRUE(differ);
    }
  }
}

TEST_F(DFlash2DecodeTest, SampledDecodingIsSeeded) {
  auto d2 = NewDFlash2(1, 3.0f);
  ASSERT_TRUE(d2);
  auto dec = Decoder(d2.get());
  ASSERT_TRUE(dec);
  SpecDecodeOptions o;
  o.max_new_tokens = 30;
  o.temperature = 1.5f;
  o.seed = 5;
  const auto a = DecodeAll(*dec, o), b = DecodeAll(*dec, o);
  EXPECT_EQ(Tokens(a), Tokens(b));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].accept_lengths, b[i].accept_lengths);
  // Another seed draws other drafts (the golden target's p is near one-hot even at T = 1.5,
  // so its tokens barely move; the drafts, from the selector's flatter q, do).
  o.seed = 6;
  const auto other = DecodeAll(*dec, o);
  bool moved = false;
  for (size_t i = 0; i < a.size(); ++i)
    moved |= other[i].accept_lengths != a[i].accept_lengths || other[i].tokens != a[i].tokens;
  EXPECT_TRUE(moved);
  for (const auto& r : a)
    for (int32_t t : r.tokens) EXPECT_LT(t, 64);
  o.sample_drafts = false;  // greedy walk drafts, q one-hot
  const auto c = DecodeAll(*dec, o), d = DecodeAll(*dec, o);
  EXPECT_EQ(Tokens(c), Tokens(d));
}

TEST_F(DFlash2DecodeTest, BatchedDecodingGivesEachPromptItsOwnDecode) {
  auto one = NewDFlash2(1, 3.0f);
  auto many = NewDFlash2(3, 3.0f);
  ASSERT_TRUE(one && many);
  auto dec = Decoder(one.get());
  ASSERT_TRUE(dec);
  auto batch = DFlashBatchDecoder::Create(target_.get(), many.get(), 3, kMaxContext);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  for (float t : {0.0f, 1.5f}) {
    SpecDecodeOptions o;
    o.max_new_tokens = 30;
    o.temperature = t;
    o.seed = 9;
    const auto alone = DecodeAll(*dec, o);
    auto together = (*batch)->GenerateAll(kPrompts, o);
    ASSERT_TRUE(together.ok()) << together.status().ToString();
    ASSERT_EQ(together->size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      EXPECT_EQ((*together)[i].tokens, alone[i].tokens) << "temperature " << t << " prompt " << i;
      EXPECT_EQ((*together)[i].accept_lengths, alone[i].accept_lengths)
          << "temperature " << t << " prompt " << i;
    }
  }
}

}  // namespace
}  // namespace tandem::models
