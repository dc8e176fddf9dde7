// The selector ops on the CPU against float64 references (candidate_selector.h's, with the
// hidden projection taken as the identity so that hidden = proj) and finite differences, on
// odd shapes: R = 1, 7, 33; k = 1, 3, 16 and k == V; Rk = 1, 5; prev outside the vocabulary,
// targets not among the candidates, all weights 0.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/dflash2/candidate_selector.h"
#include "kernels/dflash2/selector.h"
#include "kernels/dflash2/selector_test_util.h"
#include "kernels/random/philox.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::NumericalGradient;
using testing::ToDouble;

class SelectorCpuTest : public ::testing::TestWithParam<SelectorCase> {};

TEST_P(SelectorCpuTest, ScoresForwardMatchesFloat64) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 11);
  std::vector<float> scores(p.rk());
  ASSERT_TRUE(cpu::SelectorScoresForward(p.View(scores, {p.R, p.k}), p.ProjView(), p.PredView(),
                                         p.SuccView(), p.View(p.prev, {p.R}),
                                         p.View(p.ids, {p.R, p.k}), p.View(p.unary, {p.R, p.k}),
                                         nullptr)
                  .ok());
  const std::vector<double> want = ReferenceScores(p, p.prev);
  // fp32 sums of Rk products of O(1) terms against float64.
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(scores)), want, 1e-5, 1e-5, "scores"));
}

TEST_P(SelectorCpuTest, LossMatchesFloat64) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 12);
  const std::vector<double> scores_d = ReferenceScores(p, p.prev);
  const std::vector<float> scores(scores_d.begin(), scores_d.end());
  std::vector<float> loss(1), dscores(p.rk(), 7.f);
  std::vector<int32_t> stats(2);
  const float scale = 0.25f;
  ASSERT_TRUE(cpu::SelectorLoss(p.View(loss, {1}), p.View(stats, {2}),
                                p.View(dscores, {p.R, p.k}), p.View(scores, {p.R, p.k}),
                                p.View(p.ids, {p.R, p.k}), p.View(p.targets, {p.R}),
                                p.View(p.weights, {p.R}), scale, nullptr)
                  .ok());
  const SelectorShape shape{.rows = p.R, .top_k = p.k};
  std::vector<double> dref(p.rk());
  const std::vector<double> w = ToDouble(std::span<const float>(p.weights));
  const SelectorLossResult ref = dflash2::SelectorLoss<double>(
      shape, scores_d.data(), p.ids.data(), p.targets.data(), w.data(), dref.data());
  for (double& g : dref) g *= scale;
  EXPECT_NEAR(loss[0], ref.loss, 1e-5 * (1 + ref.loss));
  EXPECT_EQ(stats[0], ref.covered);
  EXPECT_EQ(stats[1], ref.correct);
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dscores)), dref, 1e-6, 1e-5, "dscores"));
}

// d/d(proj, pred, succ) of sum_rj G[r, j] * scores[r, j] by finite differences in float64
// (pred and succ perturbed at their bf16 values), dpred and dsucc accumulating onto 0.5.
TEST_P(SelectorCpuTest, ScoresBackwardMatchesFiniteDifferences) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 13);
  const std::vector<float> g = testing::RandomFloats(p.rk(), 14);
  std::vector<float> dproj(p.R * p.Rk, 9.f), dpred(p.V * p.Rk, 0.5f), dsucc(p.V * p.Rk, 0.5f);
  ASSERT_TRUE(cpu::SelectorScoresBackward(
                  p.View(dproj, {p.R, p.Rk}), p.View(dpred, {p.V, p.Rk}),
                  p.View(dsucc, {p.V, p.Rk}), p.View(g, {p.R, p.k}), p.ProjView(), p.PredView(),
                  p.SuccView(), p.View(p.prev, {p.R}), p.View(p.ids, {p.R, p.k}), nullptr)
                  .ok());
  const std::vector<double> gd = ToDouble(std::span<const float>(g));
  const auto probe = [&](const SelectorProblem& q) { return testing::Dot(ReferenceScores(q, q.prev), gd); };
  const std::vector<double> fd_proj = NumericalGradient(
      [&](const std::vector<double>& x) { SelectorProblem q = p; q.proj_d = x; return probe(q); },
      p.proj_d);
  const std::vector<double> fd_pred = NumericalGradient(
      [&](const std::vector<double>& x) { SelectorProblem q = p; q.pred_d = x; return probe(q); },
      p.pred_d);
  const std::vector<double> fd_succ = NumericalGradient(
      [&](const std::vector<double>& x) { SelectorProblem q = p; q.succ_d = x; return probe(q); },
      p.succ_d);
  std::vector<double> dpred_want(fd_pred), dsucc_want(fd_succ);
  for (double& v : dpred_want) v += 0.5;
  for (double& v : dsucc_want) v += 0.5;
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dproj)), fd_proj, 1e-5, 1e-4, "dproj"));
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dpred)), dpred_want, 1e-5, 1e-4, "dpred"));
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dsucc)), dsucc_want, 1e-5, 1e-4, "dsucc"));
}

// The walks against candidate_selector.h's float64 greedy path, block by block.
TEST_P(SelectorCpuTest, GreedyWalkMatchesFloat64Path) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 15);
  for (int64_t block_rows : {int64_t{1}, p.R}) {
    const int64_t nb = p.R / block_rows;
    std::vector<int32_t> anchors(nb), path(p.R);
    for (int64_t b = 0; b < nb; ++b) anchors[b] = static_cast<int32_t>((b * 5 + 1) % p.V);
    ASSERT_TRUE(cpu::SelectorGreedyWalk(p.View(path, {p.R}), p.ProjView(), p.PredView(),
                                        p.SuccView(), p.View(p.ids, {p.R, p.k}),
                                        p.View(p.unary, {p.R, p.k}), p.View(anchors, {nb}),
                                        block_rows, nullptr)
                    .ok());
    EXPECT_EQ(path, ReferenceGreedyPath(p, anchors, block_rows)) << "block_rows " << block_rows;
  }
}

// q is softmax(scores / T) with prev = the sampled path, rows sum to 1, the slot is where u
// falls in q's running sum, and a seed gives the same path twice.
TEST_P(SelectorCpuTest, SampleWalkDrawsFromItsProbs) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 16);
  const int64_t block_rows = p.R;
  std::vector<int32_t> anchors = {3 % static_cast<int32_t>(p.V)}, path(p.R), again(p.R);
  std::vector<float> probs(p.rk()), probs2(p.rk());
  const float temp = 0.7f;
  for (auto* out : {&path, &again}) {
    std::vector<float>& pr = out == &path ? probs : probs2;
    ASSERT_TRUE(cpu::SelectorSampleWalk(p.View(*out, {p.R}), p.View(pr, {p.R, p.k}),
                                        p.ProjView(), p.PredView(), p.SuccView(),
                                        p.View(p.ids, {p.R, p.k}), p.View(p.unary, {p.R, p.k}),
                                        p.View(anchors, {1}), block_rows, temp, 42, 7, nullptr)
                    .ok());
  }
  EXPECT_EQ(path, again);
  EXPECT_EQ(probs, probs2);
  ExpectSampleConsistent(p, anchors, block_rows, temp, 42, 7, path, probs, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SelectorCpuTest, ::testing::ValuesIn(SelectorTestCases()));

// The full chain proj, pred, succ, unary -> scores -> loss by finite differences, with
// scale: loss = scale * L.
TEST(SelectorCpuChainTest, LossGradientThroughScores) {
  const SelectorProblem p = MakeSelectorProblem({.R = 7, .k = 3, .Rk = 5, .V = 11}, 21);
  const float scale = 1.5f;
  std::vector<float> scores(p.rk()), dscores(p.rk()), loss(1);
  std::vector<int32_t> stats(2);
  ASSERT_TRUE(cpu::SelectorScoresForward(p.View(scores, {p.R, p.k}), p.ProjView(), p.PredView(),
                                         p.SuccView(), p.View(p.prev, {p.R}),
                                         p.View(p.ids, {p.R, p.k}), p.View(p.unary, {p.R, p.k}),
                                         nullptr)
                  .ok());
  ASSERT_TRUE(cpu::SelectorLoss(p.View(loss, {1}), p.View(stats, {2}), p.View(dscores, {p.R, p.k}),
                                p.View(scores, {p.R, p.k}), p.View(p.ids, {p.R, p.k}),
                                p.View(p.targets, {p.R}), p.View(p.weights, {p.R}), scale, nullptr)
                  .ok());
  ASSERT_GT(stats[0], 0);
  std::vector<float> dproj(p.R * p.Rk), dpred(p.V * p.Rk), dsucc(p.V * p.Rk);
  ASSERT_TRUE(cpu::SelectorScoresBackward(
                  p.View(dproj, {p.R, p.Rk}), p.View(dpred, {p.V, p.Rk}),
                  p.View(dsucc, {p.V, p.Rk}), p.View(dscores, {p.R, p.k}), p.ProjView(),
                  p.PredView(), p.SuccView(), p.View(p.prev, {p.R}), p.View(p.ids, {p.R, p.k}),
                  nullptr)
                  .ok());
  const auto f = [&](const SelectorProblem& q) { return scale * ReferenceLoss(q); };
  const std::vector<double> fd_proj = NumericalGradient(
      [&](const std::vector<double>& x) { SelectorProblem q = p; q.proj_d = x; return f(q); },
      p.proj_d);
  const std::vector<double> fd_unary = NumericalGradient(
      [&](const std::vector<double>& x) { SelectorProblem q = p; q.unary_d = x; return f(q); },
      p.unary_d);
  const std::vector<double> fd_succ = NumericalGradient(
      [&](const std::vector<double>& x) { SelectorProblem q = p; q.succ_d = x; return f(q); },
      p.succ_d);
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dproj)), fd_proj, 1e-5, 1e-3, "dproj"));
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dscores)), fd_unary, 1e-5, 1e-3, "dunary"));
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dsucc)), fd_succ, 1e-5, 1e-3, "dsucc"));
  EXPECT_NEAR(loss[0] * scale, f(p), 1e-5);
}

// An anchor outside the vocabulary: the first row takes the best unary score (ties: the
// lower slot), the next rows pair with the chosen tokens.
TEST(SelectorCpuWalkTest, AnchorOutsideVocabularyAndTies) {
  SelectorProblem p = MakeSelectorProblem({.R = 3, .k = 4, .Rk = 5, .V = 9}, 31);
  p.unary[0] = p.unary[2] = 5.f;  // tie between slots 0 and 2 of row 0
  p.unary_d[0] = p.unary_d[2] = 5.0;
  std::vector<int32_t> anchors = {-1}, path(3);
  ASSERT_TRUE(cpu::SelectorGreedyWalk(p.View(path, {3}), p.ProjView(), p.PredView(), p.SuccView(),
                                      p.View(p.ids, {3, 4}), p.View(p.unary, {3, 4}),
                                      p.View(anchors, {1}), 3, nullptr)
                  .ok());
  EXPECT_EQ(path[0], p.ids[0]);
  // Rows 1 and 2 walk on from the first row's token exactly like a walk anchored there.
  SelectorProblem tail = p;
  tail.R = 2;
  tail.proj_d.erase(tail.proj_d.begin(), tail.proj_d.begin() + p.Rk);
  tail.ids.erase(tail.ids.begin(), tail.ids.begin() + p.k);
  tail.unary_d.erase(tail.unary_d.begin(), tail.unary_d.begin() + p.k);
  const std::vector<int32_t> rest = ReferenceGreedyPath(tail, {path[0]}, 2);
  EXPECT_EQ(path[1], rest[0]);
  EXPECT_EQ(path[2], rest[1]);
}

// Many independent one-row blocks of one row's data: the sampled slots' frequencies follow q.
TEST(SelectorCpuWalkTest, SampleFrequenciesFollowProbs) {
  constexpr int64_t kRows = 4000, kK = 4;
  const SelectorProblem one = MakeSelectorProblem({.R = 1, .k = kK, .Rk = 5, .V = 7}, 41);
  SelectorProblem p = one;
  p.R = kRows;
  p.proj_f.clear(), p.ids.clear(), p.unary.clear();
  for (int64_t r = 0; r < kRows; ++r) {
    p.proj_f.insert(p.proj_f.end(), one.proj_f.begin(), one.proj_f.end());
    p.ids.insert(p.ids.end(), one.ids.begin(), one.ids.end());
    p.unary.insert(p.unary.end(), one.unary.begin(), one.unary.end());
  }
  std::vector<int32_t> anchors(kRows, 2), path(kRows);
  std::vector<float> probs(kRows * kK);
  ASSERT_TRUE(cpu::SelectorSampleWalk(p.View(path, {kRows}), p.View(probs, {kRows, kK}),
                                      p.ProjView(), p.PredView(), p.SuccView(),
                                      p.View(p.ids, {kRows, kK}), p.View(p.unary, {kRows, kK}),
                                      p.View(anchors, {kRows}), 1, 1.3f, 5, 0, nullptr)
                  .ok());
  for (int64_t j = 0; j < kK; ++j) {
    const double q = probs[j];
    const double n = static_cast<double>(std::count(path.begin(), path.end(), one.ids[j]));
    // Binomial: 5 standard deviations.
    EXPECT_NEAR(n / kRows, q, 5 * std::sqrt(q * (1 - q) / kRows) + 1e-9) << "slot " << j;
  }
}

// dhidden += sum_j dunary * t' * lm_head[ids] against float64 finite differences of
// sum_j dunary[r, j] * transform(lm_head[ids[r, j]] . h[r]), with and without a soft cap.
TEST(SelectorCpuHeadTest, CandidateHeadBackwardMatchesFiniteDifferences) {
  constexpr int64_t R = 7, K = 3, H = 13, V = 11;
  const SelectorProblem ids_src = MakeSelectorProblem({.R = R, .k = K, .Rk = 1, .V = V}, 51);
  const std::vector<bf16> head = testing::RandomBf16(V * H, 52);
  const std::vector<double> head_d = ToDouble(head);
  std::vector<float> hidden_f = testing::RandomFloats(R * H, 53);
  const std::vector<double> h0 = ToDouble(std::span<const float>(hidden_f));
  std::vector<float> dunary = testing::RandomFloats(R * K, 54);
  dunary[4] = 0.f;
  for (const auto& [mult, cap] : {std::pair{1.f, 0.f}, std::pair{2.5f, 3.f}}) {
    const auto transform = [&](double x) { return cap > 0 ? cap * std::tanh(mult * x / cap) : mult * x; };
    std::vector<float> values(R * K);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < K; ++j) {
        double x = 0;
        for (int64_t h = 0; h < H; ++h) x += head_d[ids_src.ids[r * K + j] * H + h] * h0[r * H + h];
        values[r * K + j] = static_cast<float>(transform(x));
      }
    const std::vector<double> fd = NumericalGradient(
        [&](const std::vector<double>& hid) {
          double f = 0;
          for (int64_t r = 0; r < R; ++r)
            for (int64_t j = 0; j < K; ++j) {
              double x = 0;
              for (int64_t h = 0; h < H; ++h) x += head_d[ids_src.ids[r * K + j] * H + h] * hid[r * H + h];
              f += dunary[r * K + j] * transform(x);
            }
          return f;
        },
        h0);
    std::vector<bf16> dh(R * H, bf16(0.25f));
    ASSERT_TRUE(cpu::CandidateHeadBackward(
                    TensorView(dh.data(), DType::kBF16, {R, H}),
                    TensorView(dunary.data(), DType::kF32, {R, K}),
                    TensorView(values.data(), DType::kF32, {R, K}),
                    ids_src.View(ids_src.ids, {R, K}),
                    TensorView(const_cast<bf16*>(head.data()), DType::kBF16, {V, H}), mult, cap,
                    nullptr)
                    .ok());
    std::vector<double> want(fd);
    for (double& v : want) v += 0.25;
    // One bf16 rounding of the result (values are f32-rounded: ~1e-7 relative on t').
    EXPECT_TRUE(AllClose(ToDouble(dh), want, 1e-4, 1.0 / 128, "dhidden"))
        << "multiplier " << mult << " softcap " << cap;
  }
}

TEST(SelectorCpuErrorsTest, RejectsBadArguments) {
  const SelectorProblem p = MakeSelectorProblem({.R = 7, .k = 3, .Rk = 5, .V = 11}, 61);
  std::vector<float> scores(p.rk());
  std::vector<int32_t> bad_ids(p.ids);
  bad_ids[5] = static_cast<int32_t>(p.V);
  EXPECT_FALSE(cpu::SelectorScoresForward(p.View(scores, {p.R, p.k}), p.ProjView(), p.PredView(),
                                          p.SuccView(), p.View(p.prev, {p.R}),
                                          p.View(bad_ids, {p.R, p.k}),
                                          p.View(p.unary, {p.R, p.k}), nullptr)
                   .ok());
  std::vector<int32_t> wide(p.R * 65);
  std::vector<float> wide_f(p.R * 65);
  EXPECT_FALSE(cpu::SelectorScoresForward(p.View(wide_f, {p.R, 65}), p.ProjView(), p.PredView(),
                                          p.SuccView(), p.View(p.prev, {p.R}),
                                          p.View(wide, {p.R, 65}), p.View(wide_f, {p.R, 65}),
                                          nullptr)
                   .ok());
  std::vector<int32_t> path(p.R), anchors(2);
  EXPECT_FALSE(cpu::SelectorGreedyWalk(p.View(path, {p.R}), p.ProjView(), p.PredView(),
                                       p.SuccView(), p.View(p.ids, {p.R, p.k}),
                                       p.View(p.unary, {p.R, p.k}), p.View(anchors, {2}), 2,
                                       nullptr)
                   .ok());  // 2 does not divide 7
  std::vector<float> probs(p.rk());
  std::vector<int32_t> one_anchor = {1};
  EXPECT_FALSE(cpu::SelectorSampleWalk(p.View(path, {p.R}), p.View(probs, {p.R, p.k}),
                                       p.ProjView(), p.PredView(), p.SuccView(),
                                       p.View(p.ids, {p.R, p.k}), p.View(p.unary, {p.R, p.k}),
                                       p.View(one_anchor, {1}), p.R, 0.f, 1, 0, nullptr)
                   .ok());  // temperature 0
}

}  // namespace
}  // namespace tandem::kernels::dflash2
