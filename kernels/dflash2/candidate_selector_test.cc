// The candidate selector: top-k with ties, hand-computed scores, loss and greedy walk, and
// finite-difference gradients of the loss in float64 through every input it reads (hidden,
// hidden projection, both codebooks and the unary logits).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/dflash2/candidate_selector.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::NumericalGradient;
using testing::RandomFloats;
using testing::ToDouble;

std::vector<double> RandomDoubles(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> f = RandomFloats(n, seed, lo, hi);
  return ToDouble(std::span<const float>(f));
}

TEST(CandidateSelectorTest, TopKOrdersByValueThenId) {
  SelectorShape s{.rows = 2, .hidden = 1, .vocab = 5, .rank = 1, .top_k = 3};
  const std::vector<double> logits = {0.5, 2, 0.5, -1, 2,   // ties: 2 at ids 1, 4; 0.5 at 0, 2
                                      -3, -2, -1, -4, -5};
  std::vector<int32_t> ids(6);
  std::vector<double> values(6);
  SelectorTopK(s, logits.data(), ids.data(), values.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 4, 0, 2, 1, 0}));
  EXPECT_EQ(values, (std::vector<double>{2, 2, 0.5, -1, -2, -3}));
}

// V = 4, H = 2, R = 2, k = 2, one row.
TEST(CandidateSelectorTest, HandComputedScoresAndLoss) {
  SelectorShape s{.rows = 1, .hidden = 2, .vocab = 4, .rank = 2, .top_k = 2};
  const std::vector<double> hidden = {1, 2};
  const std::vector<double> wh = {1, 0, 0.5, 0.5};  // P = (1, 1.5)
  const std::vector<double> pred = {0, 0, 1, 2, 0, 0, 0, 0};    // A[1] = (1, 2)
  const std::vector<double> succ = {0, 0, 0, 0, 1, -1, 2, 0};   // B[2] = (1,-1), B[3] = (2,0)
  const std::vector<int32_t> prev = {1}, ids = {2, 3};
  const std::vector<double> unary = {0.25, 0.5};
  std::vector<double> proj(2), scores(2);
  SelectorScoresForward(s, hidden.data(), wh.data(), pred.data(), succ.data(), prev.data(),
                        ids.data(), unary.data(), proj.data(), scores.data());
  EXPECT_EQ(proj, (std::vector<double>{1, 1.5}));
  // S0 = 0.25 + 1*1*1 + 2*1.5*(-1) = -1.75; S1 = 0.5 + 1*1*2 + 0 = 2.5.
  EXPECT_EQ(scores, (std::vector<double>{-1.75, 2.5}));
  const std::vector<int32_t> target = {2};
  const std::vector<double> w = {2.0};
  std::vector<double> ds(2);
  SelectorLossResult r = SelectorLoss(s, scores.data(), ids.data(), target.data(), w.data(),
                                      ds.data());
  // CE at index 0 = log(1 + e^{4.25}); the weight cancels against the denominator.
  EXPECT_NEAR(r.loss, std::log1p(std::exp(4.25)), 1e-12);
  EXPECT_EQ(r.weight, 2.0);
  EXPECT_EQ(r.covered, 1);
  EXPECT_EQ(r.correct, 0);
  const double p0 = 1 / (1 + std::exp(4.25));
  const std::vector<double> want = {p0 - 1, 1 - p0};
  EXPECT_TRUE(AllClose(ds, want, 1e-12, 0, "dscores"));
}

// Rows whose target is no candidate, or whose weight is 0, count for nothing; the rest are
// averaged with their weights.
TEST(CandidateSelectorTest, LossCountsCoveredWeightedRowsOnly) {
  SelectorShape s{.rows = 4, .hidden = 1, .vocab = 9, .rank = 1, .top_k = 2};
  const std::vector<double> scores = {0, 0, 1, 0, 5, -5, 0, 3};
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> target = {1, 4, 0, 7};  // row 2: target not a candidate
  const std::vector<double> w = {1, 3, 10, 0};       // row 3: weight 0
  std::vector<double> ds(8);
  SelectorLossResult r = SelectorLoss(s, scores.data(), ids.data(), target.data(), w.data(),
                                      ds.data());
  const double ce0 = std::log(2.0), ce1 = std::log1p(std::exp(1.0));
  EXPECT_NEAR(r.loss, (1 * ce0 + 3 * ce1) / 4, 1e-12);
  EXPECT_EQ(r.covered, 2);
  EXPECT_EQ(r.weight, 4.0);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(ds[i], 0.0) << i;
  // Nothing covered: zero loss and gradient, not a division by zero.
  const std::vector<double> w0 = {0, 0, 10, 0};
  r = SelectorLoss(s, scores.data(), ids.data(), target.data(), w0.data(), ds.data());
  EXPECT_EQ(r.loss, 0.0);
  for (double g : ds) EXPECT_EQ(g, 0.0);
}

// The walk conditions each position on the token it chose before (not on the unary argmax).
TEST(CandidateSelectorTest, GreedyPathFollowsItsOwnChoices) {
  SelectorShape s{.rows = 2, .hidden = 1, .vocab = 4, .rank = 1, .top_k = 2};
  const std::vector<double> proj = {1, 1};
  // A[0] = 0 (anchor), A[1] = 1, A[2] = -1; B[1] = 0, B[2] = 0, B[3] = 10.
  const std::vector<double> pred = {0, 1, -1, 0};
  const std::vector<double> succ = {0, 0, 0, 10};
  // Position 0: candidates 1, 2 with unary 1 > 0: picks 1 (pair terms are 0 after the anchor).
  // Position 1: candidates 2, 3 with unary 2 > 0; after 1 the pair term of 3 is +10: picks 3.
  const std::vector<int32_t> ids = {1, 2, 2, 3};
  const std::vector<double> unary = {1, 0, 2, 0};
  std::vector<int32_t> path(2);
  SelectorGreedyPath(s, 2, proj.data(), pred.data(), succ.data(), ids.data(), unary.data(), 0,
                     path.data());
  EXPECT_EQ(path, (std::vector<int32_t>{1, 3}));
  // Position 0 now prefers 2; after 2 (A[2] = -1) candidate 3 scores 0 - 10: picks 2.
  const std::vector<double> unary2 = {0, 1, 2, 0};
  SelectorGreedyPath(s, 2, proj.data(), pred.data(), succ.data(), ids.data(), unary2.data(), 0,
                     path.data());
  EXPECT_EQ(path, (std::vector<int32_t>{2, 2}));
}

TEST(CandidateSelectorTest, FiniteDifferences) {
  SelectorShape s{.rows = 9, .hidden = 24, .vocab = 11, .rank = 5, .top_k = 4};
  const std::vector<double> logits = RandomDoubles(s.rows * s.vocab, 31, -2.f, 2.f);
  std::vector<int32_t> ids(static_cast<size_t>(s.rows * s.top_k));
  std::vector<double> values(ids.size());
  SelectorTopK(s, logits.data(), ids.data(), values.data());
  // Targets: the 2nd or 4th candidate on most rows, a non-candidate on rows 3 and 7; weights
  // like a block: 0 for the anchor slot (row 0), decaying after.
  std::vector<int32_t> target(9), prev(9);
  std::vector<double> w(9);
  for (int t = 0; t < 9; ++t) {
    target[t] = ids[t * 4 + (t % 2 == 0 ? 1 : 3)];
    w[t] = t == 0 ? 0.0 : std::exp(-(t - 1) / 7.0);
  }
  for (int t : {3, 7}) {
    for (int v = 0; v < 11; ++v) {
      bool candidate = false;
      for (int j = 0; j < 4; ++j) candidate = candidate || ids[t * 4 + j] == v;
      if (!candidate) { target[t] = v; break; }
    }
  }
  prev[0] = 5;  // the anchor token
  for (int t = 1; t < 9; ++t) prev[t] = target[t - 1];  // teacher-forced predecessors
  const std::vector<double> hidden = RandomDoubles(s.rows * s.hidden, 32);
  const std::vector<double> wh = RandomDoubles(s.rank * s.hidden, 33, -0.5f, 0.5f);
  const std::vector<double> pred = RandomDoubles(s.vocab * s.rank, 34);
  const std::vector<double> succ = RandomDoubles(s.vocab * s.rank, 35);

  auto loss = [&](const std::vector<double>& h, const std::vector<double>& whv,
                  const std::vector<double>& a, const std::vector<double>& b,
                  const std::vector<double>& lg, std::vector<double>* ds_out) {
    std::vector<double> unary(ids.size()), proj(static_cast<size_t>(s.rows * s.rank)),
        scores(ids.size()), ds(ids.size());
    for (int64_t t = 0; t < s.rows; ++t)
      for (int64_t j = 0; j < s.top_k; ++j)
        unary[t * s.top_k + j] = lg[t * s.vocab + ids[t * s.top_k + j]];
    SelectorScoresForward(s, h.data(), whv.data(), a.data(), b.data(), prev.data(), ids.data(),
                          unary.data(), proj.data(), scores.data());
    const double l = SelectorLoss(s, scores.data(), ids.data(), target.data(), w.data(),
                                  ds.data()).loss;
    if (ds_out) *ds_out = ds;
    return l;
  };
  std::vector<double> ds;
  loss(hidden, wh, pred, succ, logits, &ds);
  std::vector<double> proj(static_cast<size_t>(s.rows * s.rank)), scores(ids.size()),
      unary(ids.size());
  SelectorScoresForward(s, hidden.data(), wh.data(), pred.data(), succ.data(), prev.data(),
                        ids.data(), values.data(), proj.data(), scores.data());
  std::vector<double> dlogits(logits.size(), 0), dh(hidden.size(), 0), dwh(wh.size(), 0),
      dpred(pred.size(), 0), dsucc(succ.size(), 0);
  SelectorScoresBackward(s, hidden.data(), wh.data(), pred.data(), succ.data(), prev.data(),
                         ids.data(), proj.data(), ds.data(), dlogits.data(), dh.data(),
                         dwh.data(), dpred.data(), dsucc.data());

  auto num = [&](int which) {
    std::vector<double> base = which == 0 ? hidden : which == 1 ? wh : which == 2 ? pred
                               : which == 3 ? succ : logits;
    return NumericalGradient(
        [&](const std::vector<double>& v) {
          return loss(which == 0 ? v : hidden, which == 1 ? v : wh, which == 2 ? v : pred,
                      which == 3 ? v : succ, which == 4 ? v : logits, nullptr);
        },
        base);
  };
  EXPECT_TRUE(AllClose(dh, num(0), 1e-9, 1e-6, "dhidden"));
  EXPECT_TRUE(AllClose(dwh, num(1), 1e-9, 1e-6, "dwh"));
  EXPECT_TRUE(AllClose(dpred, num(2), 1e-9, 1e-6, "dpred"));
  EXPECT_TRUE(AllClose(dsucc, num(3), 1e-9, 1e-6, "dsucc"));
  EXPECT_TRUE(AllClose(dlogits, num(4), 1e-9, 1e-6, "dlogits"));
  // Rows 3 and 7 (target not a candidate) and row 0 (weight 0) give no gradient.
  for (int t : {0, 3, 7})
    for (int c = 0; c < s.hidden; ++c) EXPECT_EQ(dh[t * s.hidden + c], 0.0) << t;
}

}  // namespace
}  // namespace tandem::kernels::dflash2
