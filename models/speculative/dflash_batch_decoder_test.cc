// CPU tests of batched speculative decoding (DFlashBatchDecoder): every prompt's tokens and
// accept lengths equal DFlashDecoder's on it alone (greedy and sampled, with slots refilled
// as sequences end, with padding drafter blocks), and the checks that refuse bad requests.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_checkpoint.h"
#include "models/speculative/decode_test_util.h"
#include "models/speculative/dflash_batch_decoder.h"
#include "models/speculative/dflash_decoder.h"

namespace tandem::models {
namespace {

constexpr int64_t kContext = 96;

// The trained tiny golden pair: its drafts are often accepted, so accept lengths vary and a
// batched draft that differed from the single one would show.
class BatchDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/dflash_decode_tiny/";
    auto target = Qwen3Target::Load(dir_ + "target", kernels::HostAllocator(), {.max_tokens = 64});
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    target_ = std::move(*target);
    auto config = LoadDFlashConfig(dir_ + "drafter");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
  }
  std::unique_ptr<DFlashDrafter> Drafter(int64_t blocks, int64_t max_tokens) {
    auto d = DFlashDrafter::Create(config_, {.max_tokens = max_tokens, .num_blocks = blocks},
                                   kernels::HostAllocator(), nullptr);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(LoadDFlashWeights(dir_ + "drafter", **d).ok());
    return std::move(*d);
  }
  // Prompts of different lengths from the golden's vocabulary.
  std::vector<std::vector<int32_t>> Prompts(int n) {
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < n; ++i)
      out.push_back(testing::MakeBatch({6 + 3 * (i % 4)}, target_->config().vocab_size - 1,
                                       100 + uint32_t(i))
                        .ids);
    out[0] = {34, 27, 31, 40, 7, 37, 55, 24};  // the golden's first prompt
    return out;
  }
  // Each prompt alone through DFlashDecoder, prompt i with seed o.seed + i.
  std::vector<SpecDecodeResult> OneAtATime(const std::vector<std::vector<int32_t>>& prompts,
                                           SpecDecodeOptions o) {
    auto drafter = Drafter(1, kContext);
    auto d = DFlashDecoder::Create(target_.get(), drafter.get(), kContext);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    std::vector<SpecDecodeResult> out;
    for (size_t i = 0; i < prompts.size(); ++i) {
      o.prompt_index = i;
      auto r = (*d)->Generate(prompts[i], o);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      out.push_back(*r);
    }
    return out;
  }
  std::string dir_;
  std::unique_ptr<Qwen3Target> target_;
  DFlashConfig config_;
};

TEST_F(BatchDecoderTest, SameTokensAndAcceptLengthsAsOneAtATime) {
  const auto prompts = Prompts(7);
  SpecDecodeOptions o;
  o.max_new_tokens = 30;
  o.stop_token_ids = {prompts[3][2]};  // some sequences stop early, freeing their slot
  // Greedy; sampled with top-k (candidates through RowTopK); sampled over whole rows (top-p);
  // sampled with greedy drafts.
  for (auto [temperature, top_p, top_k, sample_drafts] :
       {std::tuple<float, float, int64_t, bool>{0.0f, 1.0f, 0, true},
        {0.8f, 1.0f, 12, true},
        {0.8f, 0.95f, 0, true},
        {0.8f, 1.0f, 12, false}}) {
    o.temperature = temperature;
    o.top_p = top_p;
    o.top_k = top_k;
    o.sample_drafts = sample_drafts;
    o.seed = 11;
    const std::vector<SpecDecodeResult> want = OneAtATime(prompts, o);
    int64_t steps = 0, accepted = 0;
    for (const SpecDecodeResult& r : want) {
      steps += static_cast<int64_t>(r.accept_lengths.size());
      for (int32_t a : r.accept_lengths) accepted += a;
    }
    // The check has teeth only if drafts get accepted.
    EXPECT_GT(static_cast<double>(accepted) / static_cast<double>(steps), 1.3) << temperature;
    // Batch 3 with 3 drafter blocks, and batch 2 with 4 (two padding blocks, as on CUDA).
    for (auto [batch, blocks] : {std::pair<int64_t, int64_t>{3, 3}, {2, 4}}) {
      auto drafter = Drafter(blocks, batch * kContext);
      auto d = DFlashBatchDecoder::Create(target_.get(), drafter.get(), batch, kContext);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      auto got = (*d)->GenerateAll(prompts, o);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), prompts.size());
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ((*got)[i].tokens, want[i].tokens)
            << "prompt " << i << " batch " << batch << " T " << temperature;
        EXPECT_EQ((*got)[i].accept_lengths, want[i].accept_lengths)
            << "prompt " << i << " batch " << batch << " T " << temperature;
        EXPECT_EQ((*got)[i].prefill_tokens, static_cast<int64_t>(prompts[i].size()));
      }
    }
  }
}

TEST_F(BatchDecoderTest, BlockSizeOneWithoutADrafter) {
  const auto prompts = Prompts(5);
  SpecDecodeOptions o;
  o.max_new_tokens = 12;
  o.block_size = 1;
  const std::vector<SpecDecodeResult> want = OneAtATime(prompts, o);
  auto d = DFlashBatchDecoder::Create(target_.get(), nullptr, 4, kContext);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto got = (*d)->GenerateAll(prompts, o);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ((*got)[i].tokens, want[i].tokens) << i;
    EXPECT_EQ((*got)[i].accept_lengths, std::vector<int32_t>(11, 1)) << i;
  }
  // The drafter's block needs a drafter.
  o.block_size = 2;
  EXPECT_FALSE((*d)->GenerateAll(prompts, o).ok());
}

TEST_F(BatchDecoderTest, RefusesBadRequests) {
  auto small = Drafter(2, kContext);  // room for one context of kContext, not three
  Status s = DFlashBatchDecoder::Create(target_.get(), small.get(), 3, kContext).status();
  EXPECT_NE(s.ToString().find("num_blocks >= 3 and max_tokens >= 288"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(DFlashBatchDecoder::Create(target_.get(), nullptr, 0, kContext).ok());
  auto drafter = Drafter(3, 3 * kContext);
  auto d = DFlashBatchDecoder::Create(target_.get(), drafter.get(), 3, kContext);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  SpecDecodeOptions o;
  o.max_new_tokens = 8;
  const int32_t v = static_cast<int32_t>(target_->config().vocab_size);
  const std::vector<std::vector<int32_t>> bad_id = {{1, 2}, {3, v}};
  s = (*d)->GenerateAll(bad_id, o).status();
  EXPECT_NE(s.ToString().find("prompt 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("prompt token 1 is id"), std::string::npos) << s.ToString();
  const std::vector<std::vector<int32_t>> too_long = {std::vector<int32_t>(80, 1)};
  s = (*d)->GenerateAll(too_long, o).status();
  EXPECT_NE(s.ToString().find("exceed the context limit 96"), std::string::npos) << s.ToString();
  const std::vector<std::vector<int32_t>> empty = {{}};
  EXPECT_FALSE((*d)->GenerateAll(empty, o).ok());
  // 3 x 16 rows fit the target's 64, 4 x 16 would not.
  auto wide = Drafter(5, 5 * kContext);
  auto w = DFlashBatchDecoder::Create(target_.get(), wide.get(), 5, kContext);
  ASSERT_TRUE(w.ok());
  s = (*w)->GenerateAll(Prompts(5), o).status();
  EXPECT_NE(s.ToString().find("exceed the target's max_tokens 64"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace tandem::models
