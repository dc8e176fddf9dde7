#include "models/dflash/dflash_metrics.h"

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::models {
namespace {

// Straight from the definition: per block, the length of its run of correct drafted slots.
BlockAcceptance Reference(const std::vector<uint8_t>& c, int64_t bs) {
  const int64_t nb = static_cast<int64_t>(c.size()) / bs;
  double run_sum = 0, hits = 0;
  for (int64_t b = 0; b < nb; ++b) {
    int64_t j = 1;
    while (j < bs && c[b * bs + j]) ++j;
    run_sum += static_cast<double>(j - 1);
    for (int64_t k = 1; k < bs; ++k) hits += c[b * bs + k];
  }
  return {1.0 + run_sum / nb, hits / (nb * (bs - 1))};
}

TEST(BlockAcceptanceTest, AllCorrectGivesTheBlockSize) {
  std::vector<uint8_t> c(3 * 16, 1);
  BlockAcceptance a = BlockAcceptanceStats(c.data(), 48, 16);
  EXPECT_DOUBLE_EQ(a.tau, 16.0);
  EXPECT_DOUBLE_EQ(a.accuracy, 1.0);
}

TEST(BlockAcceptanceTest, SlotZeroIsNotCountedAndAMissEndsTheRun) {
  // Block 0: slot 0 wrong (ignored), slots 1,2 right, slot 3 wrong, slot 4 right.
  // Block 1: slot 1 wrong, the rest right.
  const std::vector<uint8_t> c = {0, 1, 1, 0, 1, 1, 0, 1, 1, 1};
  BlockAcceptance a = BlockAcceptanceStats(c.data(), 10, 5);
  EXPECT_DOUBLE_EQ(a.tau, 1.0 + (2.0 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(a.accuracy, 6.0 / 8);
}

TEST(BlockAcceptanceTest, MatchesTheDefinitionOnRandomOddShapes) {
  std::mt19937 rng(7);
  for (int64_t bs : {2, 3, 7, 16}) {
    for (int64_t nb : {1, 5, 33}) {
      std::vector<uint8_t> c(nb * bs);
      for (auto& x : c) x = static_cast<uint8_t>(rng() % 4 != 0);  // mostly right
      BlockAcceptance got = BlockAcceptanceStats(c.data(), nb * bs, bs);
      BlockAcceptance want = Reference(c, bs);
      EXPECT_NEAR(got.tau, want.tau, 1e-12) << "bs " << bs << " blocks " << nb;
      EXPECT_NEAR(got.accuracy, want.accuracy, 1e-12) << "bs " << bs << " blocks " << nb;
    }
  }
}

TEST(BlockAcceptanceTest, NoBlocksGivesTauOne) {
  BlockAcceptance a = BlockAcceptanceStats(nullptr, 0, 16);
  EXPECT_DOUBLE_EQ(a.tau, 1.0);
  EXPECT_DOUBLE_EQ(a.accuracy, 0.0);
}

}  // namespace
}  // namespace tandem::models
