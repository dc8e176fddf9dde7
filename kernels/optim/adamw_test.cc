// CPU GradNorm / AdamW against float64 references over several steps: clipping, bias
// correction, decoupled weight decay, the bf16 copy, and skipping on non-finite grads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/optim/adamw.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::RandomF32;

TensorView F32(std::vector<float>& v) {
  return TensorView(v.data(), DType::kF32, {static_cast<int64_t>(v.size())});
}

TEST(GradNormCpu, NormClipAndNonFinite) {
  auto g = RandomF32(1001, 1);
  std::vector<float> stats(kGradStatsSize);
  double want = 0;
  for (float x : g) want += double{x} * x;
  ASSERT_TRUE(GradNorm(F32(g), 1.f, F32(stats), TensorView(), nullptr).ok());
  // Float64 sum rounded once to fp32, then sqrt: 1e-6 relative.
  EXPECT_NEAR(stats[kGradStatsNorm], std::sqrt(want), 1e-6 * std::sqrt(want));
  EXPECT_NEAR(stats[kGradStatsClip], 1.0 / (std::sqrt(want) + 1e-6), 1e-6);
  EXPECT_EQ(stats[kGradStatsNonFinite], 0.f);

  ASSERT_TRUE(GradNorm(F32(g), 1e6f, F32(stats), TensorView(), nullptr).ok());
  EXPECT_EQ(stats[kGradStatsClip], 1.f);  // norm below max: no clipping
  ASSERT_TRUE(GradNorm(F32(g), 0.f, F32(stats), TensorView(), nullptr).ok());
  EXPECT_EQ(stats[kGradStatsClip], 1.f);  // max_norm 0: clipping off

  for (float bad : {NAN, INFINITY, -INFINITY}) {
    auto gb = g;
    gb[500] = bad;
    ASSERT_TRUE(GradNorm(F32(gb), 1.f, F32(stats), TensorView(), nullptr).ok());
    EXPECT_EQ(stats[kGradStatsNonFinite], 1.f) << bad;
    EXPECT_EQ(stats[kGradStatsClip], 1.f);
  }
}

// Float64 AdamW with the same clip rule, for `steps` steps on the same grads sequence.
struct RefState {
  std::vector<double> p, m, v;
};
void RefStep(RefState& s, const std::vector<float>& g, const AdamWConfig& c, double max_norm,
             int t) {
  double sq = 0;
  for (float x : g) sq += double{x} * x;
  double clip = max_norm > 0 ? std::min(1.0, max_norm / (std::sqrt(sq) + 1e-6)) : 1.0;
  double bc1 = 1 - std::pow(double{c.beta1}, t), bc2 = 1 - std::pow(double{c.beta2}, t);
  for (size_t i = 0; i < s.p.size(); ++i) {
    double gi = g[i] * clip;
    s.p[i] *= 1 - double{c.lr} * c.weight_decay;
    s.m[i] = c.beta1 * s.m[i] + (1 - double{c.beta1}) * gi;
    s.v[i] = c.beta2 * s.v[i] + (1 - double{c.beta2}) * gi * gi;
    s.p[i] -= c.lr * (s.m[i] / bc1) / (std::sqrt(s.v[i] / bc2) + c.eps);
  }
}

TEST(AdamWCpu, MatchesFloat64OverSeveralSteps) {
  const int64_t n = 777;
  AdamWConfig cfg{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  auto p = RandomF32(n, 2);
  std::vector<float> m(n, 0.f), v(n, 0.f), stats(kGradStatsSize);
  std::vector<bf16> pb(n);
  std::vector<int32_t> step{0};
  RefState ref{{p.begin(), p.end()}, std::vector<double>(n), std::vector<double>(n)};
  for (int t = 1; t <= 6; ++t) {
    auto g = RandomF32(n, 100 + t, -3.f, 3.f);
    ASSERT_TRUE(GradNorm(F32(g), 5.f, F32(stats), TensorView(), nullptr).ok());
    ASSERT_TRUE(AdamWUpdate(cfg, F32(p), F32(g), F32(m), F32(v),
                            TensorView(pb.data(), DType::kBF16, {n}), F32(stats),
                            TensorView(step.data(), DType::kI32, {1}), nullptr)
                    .ok());
    ASSERT_TRUE(AdamWFinishStep(F32(stats), TensorView(step.data(), DType::kI32, {1}), nullptr).ok());
    RefStep(ref, g, cfg, 5.0, t);
  }
  EXPECT_EQ(step[0], 6);
  for (int64_t i = 0; i < n; ++i) {
    // fp32 state: each step's update is within a few ulps of the float64 one (lr-sized
    // steps of 1e-2 on O(1) values); 6 steps stay within 1e-5 absolute.
    ASSERT_NEAR(p[i], ref.p[i], 1e-5) << i;
    ASSERT_NEAR(m[i], ref.m[i], 1e-5 * (1 + std::fabs(ref.m[i]))) << i;
    ASSERT_EQ(pb[i].bits, bf16(p[i]).bits) << i;  // the bf16 copy is the rounded master
  }
}

TEST(AdamWCpu, NonFiniteGradsSkipTheStep) {
  const int64_t n = 64;
  AdamWConfig cfg;
  auto p = RandomF32(n, 3), g = RandomF32(n, 4);
  g[10] = NAN;
  std::vector<float> m(n, 0.5f), v(n, 0.25f), stats(kGradStatsSize);
  std::vector<int32_t> step{3};
  auto p0 = p;
  ASSERT_TRUE(GradNorm(F32(g), 1.f, F32(stats), TensorView(), nullptr).ok());
  TensorView st(step.data(), DType::kI32, {1});
  ASSERT_TRUE(AdamWUpdate(cfg, F32(p), F32(g), F32(m), F32(v), TensorView(), F32(stats), st,
                          nullptr).ok());
  ASSERT_TRUE(AdamWFinishStep(F32(stats), st, nullptr).ok());
  EXPECT_EQ(p, p0);
  EXPECT_EQ(m, std::vector<float>(n, 0.5f));
  EXPECT_EQ(step[0], 3);
}

TEST(AdamWCpu, SubRangesWithTheirOwnWeightDecay) {
  // One flat buffer, two groups: [0, 40) decayed, [40, 64) not. With zero grads the
  // Adam term vanishes, so decayed params shrink by exactly (1 - lr*wd) and the rest stay.
  const int64_t n = 64;
  auto p = RandomF32(n, 5);
  std::vector<float> g(n, 0.f), m(n, 0.f), v(n, 0.f), stats(kGradStatsSize);
  std::vector<int32_t> step{0};
  auto p0 = p;
  ASSERT_TRUE(GradNorm(F32(g), 1.f, F32(stats), TensorView(), nullptr).ok());
  TensorView st(step.data(), DType::kI32, {1});
  AdamWConfig decayed{0.1f, 0.9f, 0.999f, 1e-8f, 0.5f}, plain = decayed;
  plain.weight_decay = 0.f;
  for (auto [start, len, cfg] : {std::tuple{0, 40, decayed}, std::tuple{40, 24, plain}})
    ASSERT_TRUE(AdamWUpdate(cfg, F32(p).Narrow(0, start, len), F32(g).Narrow(0, start, len),
                            F32(m).Narrow(0, start, len), F32(v).Narrow(0, start, len),
                            TensorView(), F32(stats), st, nullptr)
                    .ok());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_FLOAT_EQ(p[i], i < 40 ? p0[i] * (1.f - 0.1f * 0.5f) : p0[i]) << i;
}

TEST(AdamWCpu, RejectsMismatchedSizes) {
  std::vector<float> p(8), g(7), m(8), v(8), stats(kGradStatsSize);
  std::vector<int32_t> step{0};
  Status s = AdamWUpdate({}, F32(p), F32(g), F32(m), F32(v), TensorView(), F32(stats),
                         TensorView(step.data(), DType::kI32, {1}), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("grads"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace tandem::kernels
