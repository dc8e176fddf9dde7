// The speculative-sampling rule on the CPU: whatever the drafter proposes, the first token a
// verify step yields follows the target's distribution; drafts from the target's own
// distribution are always kept; a seed repeats its draws.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "models/speculative/spec_pick.h"

namespace tandem::models {
namespace {

constexpr int64_t kVocab = 4;

std::vector<double> Probs(const std::vector<float>& logits, float t) {
  std::vector<double> p;
  double total = 0;
  for (float x : logits) total += std::exp(x / t);
  for (float x : logits) p.push_back(std::exp(x / t) / total);
  return p;
}

TEST(SpecPickTest, FirstTokenFollowsTheTargetWhateverTheDraft) {
  const float t = 0.8f;
  // One draft slot: the drafter prefers token 0, the target token 2.
  const std::vector<float> draft = {2.0f, 0.5f, 0.0f, -1.0f};
  const std::vector<float> target = {0.0f, 0.3f, 1.5f, -0.5f,   // after the anchor
                                     0.1f, 0.2f, 0.3f, 0.4f};   // after the draft
  const std::vector<double> p = Probs({0.0f, 0.3f, 1.5f, -0.5f}, t);
  uint64_t rng = 12345;
  std::vector<int> first(kVocab, 0);
  int accepted = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const int32_t x = PickTokens(draft.data(), 1, kVocab, t, &rng)[0];
    const SampledVerify v = VerifyBySampling(draft.data(), target.data(), {&x, 1}, kVocab, t, &rng);
    ASSERT_LE(v.accepted, 1);
    ++first[v.accepted == 1 ? x : v.next];
    accepted += static_cast<int>(v.accepted);
  }
  for (int k = 0; k < kVocab; ++k) {
    const double sd = std::sqrt(p[k] * (1 - p[k]) / n);
    EXPECT_NEAR(first[k] / double(n), p[k], 5 * sd) << "token " << k;
  }
  // Acceptance is sum_x min(p(x), q(x)).
  const std::vector<double> q = Probs(draft, t);
  double overlap = 0;
  for (int k = 0; k < kVocab; ++k) overlap += std::min(p[k], q[k]);
  EXPECT_NEAR(accepted / double(n), overlap, 5 * std::sqrt(overlap * (1 - overlap) / n));
}

TEST(SpecPickTest, DraftsFromTheTargetsDistributionAreAllKept) {
  const float t = 1.0f;
  const std::vector<float> rows = {0.2f, 1.0f, -0.3f, 0.5f, 0.9f, 0.1f, 0.0f, -2.0f,
                                   0.3f, 0.3f, 0.3f, 0.3f};  // 2 drafts + the bonus row
  uint64_t rng = 7;
  for (int i = 0; i < 200; ++i) {
    const std::vector<int32_t> drafts = PickTokens(rows.data(), 2, kVocab, t, &rng);
    const SampledVerify v = VerifyBySampling(rows.data(), rows.data(), drafts, kVocab, t, &rng);
    EXPECT_EQ(v.accepted, 2);
    EXPECT_GE(v.next, 0);
    EXPECT_LT(v.next, kVocab);
  }
}

TEST(SpecPickTest, ASeedRepeatsItsDraws) {
  const std::vector<float> draft = {2.0f, 0.5f, 0.0f, -1.0f, 0.0f, 0.0f, 3.0f, 0.0f};
  const std::vector<float> target = {0.0f, 0.3f, 1.5f, -0.5f, 1.0f, 0.0f, 0.0f, 0.0f,
                                     0.1f, 0.2f, 0.3f, 0.4f};
  auto run = [&](uint64_t seed) {
    std::vector<int64_t> out;
    uint64_t rng = seed;
    for (int i = 0; i < 50; ++i) {
      const std::vector<int32_t> d = PickTokens(draft.data(), 2, kVocab, 0.7f, &rng);
      const SampledVerify v = VerifyBySampling(draft.data(), target.data(), d, kVocab, 0.7f, &rng);
      out.push_back(v.accepted * 100 + v.next);
    }
    return out;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

}  // namespace
}  // namespace tandem::models
