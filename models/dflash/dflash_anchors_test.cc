// Anchor sampling per document (anchors_per_sequence), the loss decay and the previous
// tokens of the block tables, on the CPU.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_anchors.h"
#include "models/dflash/dflash_test_util.h"

namespace tandem::models {
namespace {

using testing::HostBatch;

// Anchors per document index (cu_seqlens of `b`).
std::map<int, int> PerDocument(const HostBatch& b, const std::vector<int32_t>& anchors) {
  std::map<int, int> n;
  for (int32_t a : anchors)
    for (size_t d = 0; d + 1 < b.cu.size(); ++d)
      if (a >= b.cu[d] && a < b.cu[d + 1]) ++n[static_cast<int>(d)];
  return n;
}

TEST(DFlashLossDecayTest, WeightsFollowTheDecay) {
  HostBatch b = testing::MakeBatch({40}, 64, 2);
  const std::vector<int32_t> anchors = {5};
  for (double gamma : {7.0, 4.0, 2.5}) {
    SCOPED_TRACE(gamma);
    auto p = BuildBlockPlan(b.meta(), anchors, 1, 16, 63, gamma);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->weights[0], 0.0f);  // the anchor slot predicts nothing
    for (int j = 1; j < 16; ++j)
      EXPECT_NEAR(p->weights[j], std::exp(-(j - 1) / gamma), 1e-6) << "slot " << j;
  }
  EXPECT_FALSE(BuildBlockPlan(b.meta(), anchors, 1, 16, 63, 0.0).ok());
  EXPECT_FALSE(BuildBlockPlan(b.meta(), anchors, 1, 16, 63, -1.0).ok());
}

// prev_ids: the true previous token of every slot inside the document, also after a slot
// the loss mask drops (where targets has -1), and -1 past the document end and in padding.
TEST(DFlashBlockPlanTest, PrevIdsAreTheTrueTokensLossMaskOrNot) {
  HostBatch b = testing::MakeBatch({40, 30}, 64, 4);
  b.mask[12] = 0;  // a hole in block 0's loss mask (slot 7)
  const std::vector<int32_t> anchors = {5, 35};
  auto p = BuildBlockPlan(b.meta(), anchors, 3, 16, 63, 7.0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->prev_ids.size(), 48u);
  EXPECT_EQ(p->prev_ids[0], -1);  // the anchor slot
  for (int j = 1; j < 16; ++j) EXPECT_EQ(p->prev_ids[j], b.ids[5 + j - 1]) << "slot " << j;
  EXPECT_EQ(p->targets[7], -1);
  EXPECT_EQ(p->prev_ids[8], b.ids[12]);
  // Block 1 (anchor 35) reaches the end of document 0 (40) at slot 5.
  EXPECT_EQ(p->prev_ids[16 + 5], b.ids[39]);
  for (int j = 6; j < 16; ++j) EXPECT_EQ(p->prev_ids[16 + j], -1) << "slot " << j;
  for (int j = 0; j < 16; ++j) EXPECT_EQ(p->prev_ids[32 + j], -1) << "padding slot " << j;
}

TEST(DFlashLossDecayTest, DefaultFollowsTheBlockSize) {
  EXPECT_DOUBLE_EQ(DFlashDefaultLossDecay(16), 7.0);
  EXPECT_DOUBLE_EQ(DFlashDefaultLossDecay(8), 4.0);
  EXPECT_DOUBLE_EQ(DFlashDefaultLossDecay(32), 13.0);
}

// Eligible anchors: 6 in document 0 (10 tokens), none in document 1 (3), 26 in document 2.
TEST(DFlashAnchorsPerDocumentTest, EveryDocumentGetsItsCount) {
  HostBatch b = testing::MakeBatch({10, 3, 30}, 64, 2);
  auto all = EligibleAnchors(b.meta());
  ASSERT_TRUE(all.ok());
  for (int64_t n : {1, 4, 6, 20, 100}) {
    SCOPED_TRACE(n);
    auto s = SampleAnchorsPerDocument(b.meta(), n, 1000, 3, 0);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(std::is_sorted(s->begin(), s->end()));
    for (int32_t a : *s) EXPECT_TRUE(std::binary_search(all->begin(), all->end(), a)) << a;
    EXPECT_EQ(std::adjacent_find(s->begin(), s->end()), s->end()) << "an anchor twice";
    std::map<int, int> per = PerDocument(b, *s);
    EXPECT_EQ(per[0], std::min<int64_t>(n, 6));
    EXPECT_EQ(per[1], 0);
    EXPECT_EQ(per[2], std::min<int64_t>(n, 26));
  }
}

// When the documents want more than the step's blocks, they share them equally.
TEST(DFlashAnchorsPerDocumentTest, TheStepsBlocksAreSharedEqually) {
  HostBatch b = testing::MakeBatch({10, 3, 30}, 64, 2);
  // 4 + 4 wanted, 5 blocks: a share of 2 each, and the one left to either document.
  std::map<int, int> seen;
  for (uint64_t step = 0; step < 64; ++step) {
    auto s = SampleAnchorsPerDocument(b.meta(), 4, 5, 3, step);
    ASSERT_TRUE(s.ok());
    ASSERT_EQ(s->size(), 5u);
    std::map<int, int> per = PerDocument(b, *s);
    EXPECT_TRUE((per[0] == 2 && per[2] == 3) || (per[0] == 3 && per[2] == 2));
    ++seen[per[0]];
  }
  EXPECT_GT(seen[2], 0);
  EXPECT_GT(seen[3], 0);
  // 20 wanted from document 2 but 6 is all document 0 has: 6 + 14 of 20 blocks.
  auto s = SampleAnchorsPerDocument(b.meta(), 20, 20, 3, 0);
  ASSERT_TRUE(s.ok());
  std::map<int, int> per = PerDocument(b, *s);
  EXPECT_EQ(per[0], 6);
  EXPECT_EQ(per[2], 14);
}

TEST(DFlashAnchorsPerDocumentTest, RepeatsPerStepAndIsUniformInADocument) {
  HostBatch b = testing::MakeBatch({30}, 64, 2);  // 26 eligible anchors: 3 .. 28
  auto s1 = SampleAnchorsPerDocument(b.meta(), 4, 64, 7, 3),
       s2 = SampleAnchorsPerDocument(b.meta(), 4, 64, 7, 3),
       s3 = SampleAnchorsPerDocument(b.meta(), 4, 64, 7, 4);
  ASSERT_TRUE(s1.ok() && s2.ok() && s3.ok());
  EXPECT_EQ(*s1, *s2);
  EXPECT_NE(*s1, *s3);
  // 4 of 26 per step over 2600 steps: each anchor expected 400 times (std ~18).
  std::map<int32_t, int> count;
  for (uint64_t step = 0; step < 2600; ++step) {
    auto s = SampleAnchorsPerDocument(b.meta(), 4, 64, 7, step);
    ASSERT_TRUE(s.ok());
    for (int32_t a : *s) ++count[a];
  }
  ASSERT_EQ(count.size(), 26u);
  for (const auto& [a, n] : count) {
    EXPECT_GT(n, 300) << "anchor " << a;
    EXPECT_LT(n, 500) << "anchor " << a;
  }
  EXPECT_TRUE(SampleAnchorsPerDocument(b.meta(), 0, 64, 7, 0)->empty());
}

}  // namespace
}  // namespace tandem::models
