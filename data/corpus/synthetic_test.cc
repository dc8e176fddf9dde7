// SyntheticSource: documents that follow one learnable rule each, well-formed batches, and
// replicas and resumption that give exactly the batches of one uninterrupted source.
#include "data/corpus/synthetic.h"

#include <set>

#include <gtest/gtest.h>

#include "data/corpus/test_util.h"

namespace tandem::data {
namespace {

using testing::Sums;

SyntheticOptions TinyOptions() {
  return {.vocab = 97, .min_doc_len = 4, .max_doc_len = 30, .max_tokens = 64,
          .batches_per_epoch = 10, .epochs = 2, .seed = 5};
}

TEST(SyntheticTest, DocumentsFollowOneRuleAndBatchesAreWellFormed) {
  auto src = SyntheticSource::Create(TinyOptions()).value();
  for (int i = 0; i < 20; ++i) {
    auto b = src->Next().value().value();
    EXPECT_LE(b.tokens(), 64);
    EXPECT_GT(b.tokens(), 64 - 4);  // filled until fewer than min_doc_len tokens are left
    EXPECT_EQ(b.cu_seqlens.back(), b.tokens());
    for (int64_t s = 0; s < b.documents(); ++s) {
      const int32_t begin = b.cu_seqlens[s], end = b.cu_seqlens[s + 1];
      ASSERT_GE(end - begin, 1);
      EXPECT_LE(end - begin, 30);
      EXPECT_EQ(b.loss_mask[begin], 0);
      // Exactly the rules consistent with the whole document: at least one must fit.
      bool any = false;
      for (const auto& rule : SyntheticSource::kRules) {
        bool fits = true;
        for (int32_t t = begin; t + 1 < end; ++t) {
          fits &= b.input_ids[t + 1] == (rule[0] * b.input_ids[t] + rule[1]) % 97;
        }
        any |= fits;
      }
      EXPECT_TRUE(any) << "segment " << s << " of batch " << i;
      for (int32_t t = begin; t < end; ++t) {
        EXPECT_EQ(b.position_ids[t], t - begin);
        EXPECT_LT(b.input_ids[t], 97);
        if (t > begin) {
          EXPECT_EQ(b.loss_mask[t], 1);
        }
      }
    }
  }
}

TEST(SyntheticTest, DeterministicShardedAndResumable) {
  auto a = SyntheticSource::Create(TinyOptions()).value();
  auto b = SyntheticSource::Create(TinyOptions()).value();
  const auto all = Sums(*a);
  EXPECT_EQ(all.size(), 20u);
  EXPECT_EQ(all, Sums(*b));
  EXPECT_EQ(std::set<uint64_t>(all.begin(), all.end()).size(), all.size());
  SyntheticOptions other = TinyOptions();
  other.seed = 6;
  EXPECT_NE(all, Sums(*SyntheticSource::Create(other).value()));

  // Three replicas together produce exactly the batches of one.
  std::multiset<uint64_t> sharded;
  for (int r = 0; r < 3; ++r) {
    SyntheticOptions o = TinyOptions();
    o.replica = r;
    o.replicas = 3;
    for (uint64_t s : Sums(*SyntheticSource::Create(o).value())) sharded.insert(s);
  }
  EXPECT_EQ(sharded, std::multiset<uint64_t>(all.begin(), all.end()));

  auto first = SyntheticSource::Create(TinyOptions()).value();
  for (int i = 0; i < 13; ++i) ASSERT_TRUE(first->Next().ok());
  auto resumed = SyntheticSource::Create(TinyOptions()).value();
  ASSERT_TRUE(resumed->Seek(first->position()).ok());
  EXPECT_EQ(Sums(*resumed), std::vector<uint64_t>(all.begin() + 13, all.end()));
}

}  // namespace
}  // namespace tandem::data
