// The picking rules on the CPU: the filter (temperature, top-k, top-p), the keyed draws, and
// speculative sampling — whatever the drafter proposes, the first token a verify step yields
// follows the target's filtered distribution (a chi-square bound that "always accept" fails);
// drafts from the target's own distribution are always kept; at temperature 0 the verdict is
// greedy matching.
#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_topk.h"
#include "models/speculative/spec_pick.h"
#include "models/speculative/spec_pick_test_util.h"

namespace tandem::models {
namespace {

std::vector<double> Softmax(const std::vector<float>& logits, float t) {
  std::vector<double> p;
  double total = 0;
  for (float x : logits) total += std::exp(double(x) / t);
  for (float x : logits) p.push_back(std::exp(double(x) / t) / total);
  return p;
}

TEST(SpecPickTest, TemperatureZeroIsOneHotAtTheFirstMaximum) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f};
  const TokenDist d = FilterLogits(row.data(), 4, {});
  EXPECT_EQ(d.ids, std::vector<int32_t>{1});
  EXPECT_EQ(d.probs, std::vector<double>{1.0});
  EXPECT_EQ(ArgmaxRows(row.data(), 1, 4), std::vector<int32_t>{1});
}

TEST(SpecPickTest, FilterAppliesTemperatureThenTopKThenTopP) {
  const std::vector<float> row = {1.0f, 3.0f, 0.0f, 2.0f, 2.0f, -5.0f, 0.5f};
  // Temperature alone: softmax(row / T) over every id.
  const TokenDist all = FilterLogits(row.data(), 7, {.temperature = 0.7f});
  const std::vector<double> want = Softmax(row, 0.7f);
  ASSERT_EQ(all.ids.size(), 7u);
  for (int32_t i = 0; i < 7; ++i) EXPECT_NEAR(all.Prob(i), want[i], 1e-12);
  // Top-k 3: ids 1, 3 and 4 (2.0 twice: both in, as the 2nd and 3rd largest), renormalised.
  const TokenDist k3 = FilterLogits(row.data(), 7, {.temperature = 1.0f, .top_k = 3});
  EXPECT_EQ(k3.ids, (std::vector<int32_t>{1, 3, 4}));
  const double z = std::exp(3.0) + 2 * std::exp(2.0);
  EXPECT_NEAR(k3.Prob(1), std::exp(3.0) / z, 1e-12);
  // Top-k 2 with a tie at the cut: the lower id stays.
  EXPECT_EQ(FilterLogits(row.data(), 7, {.temperature = 1.0f, .top_k = 2}).ids,
            (std::vector<int32_t>{1, 3}));
  // Top-p: the fewest most likely tokens whose mass reaches p.
  const double p1 = want[1], p13 = want[1] + want[3];
  EXPECT_EQ(FilterLogits(row.data(), 7, {.temperature = 0.7f, .top_p = float(p1) * 0.99f}).ids,
            std::vector<int32_t>{1});
  const TokenDist two =
      FilterLogits(row.data(), 7, {.temperature = 0.7f, .top_p = float(p13) * 0.99f});
  EXPECT_EQ(two.ids, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(two.Prob(3), want[3] / p13, 1e-12);
  // Top-k then top-p: top-p's mass is measured after top-k renormalised.
  const TokenDist both =
      FilterLogits(row.data(), 7, {.temperature = 1.0f, .top_p = 0.7f, .top_k = 3});
  EXPECT_EQ(both.ids, (std::vector<int32_t>{1, 3}));  // exp(3)/z = 0.58 < 0.7 <= 0.79
  // Long rows (the partial sort grows past its first head).
  std::vector<float> flat(1000, 0.0f);
  const TokenDist half = FilterLogits(flat.data(), 1000, {.temperature = 1.0f, .top_p = 0.5f});
  EXPECT_EQ(half.ids.size(), 500u);
  EXPECT_EQ(half.ids.front(), 0);
  EXPECT_EQ(half.ids.back(), 499);
}

// The GPU path filters only the top-k candidates RowTopK brings back: the same
// distribution, bit for bit, as the filter over the whole row (ties included).
TEST(SpecPickTest, FilterOverTopKCandidatesEqualsTheWholeRow) {
  const int64_t v = 3001;
  std::vector<float> row(v);
  for (int64_t i = 0; i < v; ++i)  // 40 levels: many ties, some at every cut
    row[i] = std::floor(40 * float(KeyedUniform({3, 0, 0}, uint32_t(i), DrawKind::kPropose))) / 8;
  for (int64_t k : {1, 2, 7, 50, 1000}) {
    for (float top_p : {1.0f, 0.9f, 0.3f}) {
      const SamplingParams sp{.temperature = 0.8f, .top_p = top_p, .top_k = k};
      std::vector<int32_t> ids(k);
      std::vector<float> vals(k);
      ASSERT_TRUE(kernels::RowTopK(kernels::TensorView(ids.data(), kernels::DType::kI32, {1, k}),
                                   kernels::TensorView(vals.data(), kernels::DType::kF32, {1, k}),
                                   kernels::TensorView(row.data(), kernels::DType::kF32, {1, v}),
                                   nullptr)
                      .ok());
      const TokenDist whole = FilterLogits(row.data(), v, sp);
      const TokenDist cand = FilterCandidates(ids.data(), vals.data(), k, sp);
      EXPECT_EQ(cand.ids, whole.ids) << "k " << k << " top_p " << top_p;
      EXPECT_EQ(cand.probs, whole.probs) << "k " << k << " top_p " << top_p;
    }
  }
}

TEST(SpecPickTest, CheckSamplingParamsNamesTheField) {
  EXPECT_TRUE(CheckSamplingParams({}).ok());
  EXPECT_TRUE(CheckSamplingParams({.temperature = 0.6f, .top_p = 0.95f, .top_k = 20}).ok());
  auto msg = [](SamplingParams p) { return CheckSamplingParams(p).ToString(); };
  EXPECT_NE(msg({.temperature = -1.0f}).find("temperature"), std::string::npos);
  EXPECT_NE(msg({.temperature = INFINITY}).find("temperature"), std::string::npos);
  EXPECT_NE(msg({.temperature = NAN}).find("temperature"), std::string::npos);
  EXPECT_NE(msg({.top_p = 0.0f}).find("top_p"), std::string::npos);
  EXPECT_NE(msg({.top_p = 1.5f}).find("top_p"), std::string::npos);
  EXPECT_NE(msg({.top_p = NAN}).find("top_p"), std::string::npos);
  EXPECT_NE(msg({.top_k = -1}).find("top_k"), std::string::npos);
}

TEST(SpecPickTest, KeyedDrawsArePureFunctionsOfTheirKey) {
  const DrawKey k{7, 3, 2};
  const double u = KeyedUniform(k, 1, DrawKind::kAccept);
  EXPECT_EQ(u, KeyedUniform(k, 1, DrawKind::kAccept));
  std::set<double> seen = {u};
  seen.insert(KeyedUniform({8, 3, 2}, 1, DrawKind::kAccept));
  seen.insert(KeyedUniform({7, 4, 2}, 1, DrawKind::kAccept));
  seen.insert(KeyedUniform({7, 3, 3}, 1, DrawKind::kAccept));
  seen.insert(KeyedUniform(k, 2, DrawKind::kAccept));
  seen.insert(KeyedUniform(k, 1, DrawKind::kPropose));
  seen.insert(KeyedUniform(k, 1, DrawKind::kRedraw));
  EXPECT_EQ(seen.size(), 7u);
  double mean = 0;
  for (uint32_t s = 0; s < 10000; ++s) {
    const double x = KeyedUniform({1, 0, s}, 0, DrawKind::kRedraw);
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    mean += x / 10000;
  }
  EXPECT_NEAR(mean, 0.5, 0.015);  // sd 0.0029
}

// Speculative sampling over hand-made rows: one draft slot, the drafter preferring token 0,
// the target token 2, both filtered (T 0.8, top-k 3: token 3 is out of both).
TEST(SpecPickTest, FirstTokenFollowsTheTargetWhateverTheDraft) {
  const SamplingParams sp{.temperature = 0.8f, .top_k = 3};
  const std::vector<float> draft = {2.0f, 0.5f, 0.0f, -1.0f};
  const std::vector<float> target = {0.0f, 0.3f, 1.5f, -0.5f, 0.1f, 0.2f, 0.3f, 0.4f};
  const std::vector<TokenDist> q = {FilterLogits(draft.data(), 4, sp)};
  const std::vector<TokenDist> p = {FilterLogits(target.data(), 4, sp),
                                    FilterLogits(target.data() + 4, 4, sp)};
  const int n = 40000;
  std::vector<int64_t> first(4, 0);
  int64_t accepted = 0;
  for (int i = 0; i < n; ++i) {
    const DrawKey key{5, static_cast<uint64_t>(i), 1};
    const int32_t x = SampleDist(q[0], KeyedUniform(key, 1, DrawKind::kPropose));
    const SampledVerify v = VerifyBySampling(q, p, {&x, 1}, key);
    ASSERT_LE(v.accepted, 1);
    ++first[v.accepted == 1 ? x : v.next];
    accepted += v.accepted;
  }
  EXPECT_EQ(first[3], 0);  // filtered out of the target
  const testing::ChiSquareResult fit = testing::ChiSquareTest(first, p[0]);
  EXPECT_GT(fit.p_value, 1e-6) << "chi-square " << fit.chi2 << " df " << fit.df;
  // Acceptance is sum_x min(p(x), q(x)).
  double overlap = 0;
  for (int32_t k = 0; k < 4; ++k) overlap += std::min(p[0].Prob(k), q[0].Prob(k));
  EXPECT_NEAR(accepted / double(n), overlap, 5 * std::sqrt(overlap * (1 - overlap) / n));
}

TEST(SpecPickTest, DraftsFromTheTargetsDistributionAreAllKept) {
  const SamplingParams sp{.temperature = 1.0f, .top_p = 0.9f};
  const std::vector<float> rows = {0.2f,  1.0f, -0.3f, 0.5f, 0.9f, 0.1f, 0.0f,
                                   -2.0f, 0.3f, 0.3f,  0.3f, 0.3f};  // 2 drafts + the bonus row
  std::vector<TokenDist> p;
  for (int r = 0; r < 3; ++r) p.push_back(FilterLogits(rows.data() + 4 * r, 4, sp));
  const std::span<const TokenDist> q(p.data(), 2);
  for (uint32_t i = 0; i < 200; ++i) {
    const DrawKey key{9, 0, i};
    std::vector<int32_t> drafts;
    for (uint32_t j = 0; j < 2; ++j)
      drafts.push_back(SampleDist(q[j], KeyedUniform(key, j + 1, DrawKind::kPropose)));
    const SampledVerify v = VerifyBySampling(q, p, drafts, key);
    EXPECT_EQ(v.accepted, 2);
    EXPECT_GT(p[2].Prob(v.next), 0.0);
  }
}

TEST(SpecPickTest, AtTemperatureZeroTheVerdictIsGreedyMatching) {
  // Rows of 6 ids from keyed draws; drafts sometimes the target's argmax, sometimes not.
  for (uint32_t trial = 0; trial < 300; ++trial) {
    const int n = 4, v = 6;
    std::vector<float> d(n * v), t((n + 1) * v);
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = float(KeyedUniform({1, trial, 0}, uint32_t(i), DrawKind::kPropose));
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = float(KeyedUniform({1, trial, 0}, uint32_t(i), DrawKind::kAccept));
    std::vector<TokenDist> q, p;
    std::vector<int32_t> drafts = ArgmaxRows(d.data(), n, v);
    const std::vector<int32_t> post = ArgmaxRows(t.data(), n + 1, v);
    for (int i = 0; i < n; ++i) {
      if (trial % 3 == 0) drafts[i] = post[i];  // some blocks all accepted
      q.push_back({{drafts[i]}, {1.0}});
    }
    for (int i = 0; i <= n; ++i) p.push_back(FilterLogits(t.data() + i * v, v, {}));
    int64_t acc = 0;
    while (acc < n && drafts[acc] == post[acc]) ++acc;
    const SampledVerify got = VerifyBySampling(q, p, drafts, {2, trial, 1});
    EXPECT_EQ(got.accepted, acc);
    EXPECT_EQ(got.next, post[acc]);
  }
}

}  // namespace
}  // namespace tandem::models
