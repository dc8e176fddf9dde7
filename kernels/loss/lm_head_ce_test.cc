// CPU reference of the fused LM head + cross-entropy against a float64 naive version with
// full logits, and its backward against float64 finite differences.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/loss/lm_head_ce.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::CompareClose;
using testing::NaiveLmHeadCe;
using testing::RandomBf16;
using testing::RandomI32;
using testing::ToFloat;

struct Problem {
  int64_t rows, h, v;
  std::vector<bf16> x, w;
  std::vector<int32_t> targets;
  std::vector<float> weights;
  std::vector<double> xd, wd;
};

Problem MakeProblem(int64_t rows, int64_t h, int64_t v, uint64_t seed) {
  Problem p;
  p.rows = rows;
  p.h = h;
  p.v = v;
  p.x = RandomBf16(rows * h, seed, -1.f, 1.f);
  p.w = RandomBf16(v * h, seed + 1, -0.5f, 0.5f);
  p.targets = RandomI32(rows, seed + 2, 0, static_cast<int32_t>(v));
  p.weights = testing::RandomF32(rows, seed + 3, 0.25f, 2.f);
  if (rows > 2) {
    p.weights[1] = 0.f;       // masked by weight
    p.targets[2] = -100;      // masked by an out-of-range target (ignore_index style)
  }
  for (auto f : ToFloat(p.x)) p.xd.push_back(f);
  for (auto f : ToFloat(p.w)) p.wd.push_back(f);
  return p;
}

struct Got {
  float loss = 0;
  std::vector<int32_t> argmax;
  std::vector<uint8_t> correct;
  std::vector<bf16> dx;
};

Got RunCpu(Problem& p) {
  Got g;
  g.argmax.resize(p.rows);
  g.correct.resize(p.rows);
  g.dx.resize(p.rows * p.h);
  LmHeadCeOutputs out{TensorView(&g.loss, DType::kF32, {1}),
                      TensorView(g.argmax.data(), DType::kI32, {p.rows}),
                      TensorView(g.correct.data(), DType::kU8, {p.rows}),
                      TensorView(g.dx.data(), DType::kBF16, {p.rows, p.h}), {}, {}};
  Status st = LmHeadCrossEntropy(
      nullptr, TensorView(p.x.data(), DType::kBF16, {p.rows, p.h}),
      TensorView(p.w.data(), DType::kBF16, {p.v, p.h}),
      TensorView(p.targets.data(), DType::kI32, {p.rows}),
      TensorView(p.weights.data(), DType::kF32, {p.rows}), out, TensorView(), 4, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return g;
}

TEST(LmHeadCeCpu, MatchesFloat64Naive) {
  for (auto [rows, h, v] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 8, 7}, {5, 16, 1001}, {9, 33, 37}, {17, 64, 129}}) {
    SCOPED_TRACE(::testing::Message() << "R=" << rows << " H=" << h << " V=" << v);
    Problem p = MakeProblem(rows, h, v, 100 + rows);
    auto want = NaiveLmHeadCe(rows, h, v, p.xd, p.wd, p.targets, p.weights);
    Got got = RunCpu(p);
    // fp32 logits of exact bf16 products over H <= 64 terms: error ~1e-6; the rest is float64.
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * (1 + std::fabs(want.loss)));
    for (int64_t r = 0; r < rows; ++r) {
      const double* l = &want.logits[r * v];
      EXPECT_EQ(l[got.argmax[r]], *std::max_element(l, l + v)) << "row " << r;
      bool valid = p.targets[r] >= 0 && p.weights[r] != 0.f;
      EXPECT_EQ(got.correct[r], valid && got.argmax[r] == p.targets[r]) << "row " << r;
    }
    // dx is stored in bf16: one rounding, 2^-8 relative, plus a floor for near-zero entries.
    double scale = 0;
    for (double d : want.dx) scale = std::max(scale, std::fabs(d));
    auto rep = CompareClose(rows * h, [&](int64_t i) { return got.dx[i].f(); },
                            [&](int64_t i) { return want.dx[i]; }, 1e-3 * scale, 8e-3);
    EXPECT_TRUE(rep.ok) << rep.ToString();
  }
}

TEST(LmHeadCeCpu, BackwardMatchesFiniteDifferences) {
  Problem p = MakeProblem(4, 6, 11, 7);
  Got got = RunCpu(p);
  const double eps = 1e-5;
  for (int64_t i = 0; i < p.rows * p.h; ++i) {
    auto xp = p.xd, xm = p.xd;
    xp[i] += eps;
    xm[i] -= eps;
    double fd = (NaiveLmHeadCe(p.rows, p.h, p.v, xp, p.wd, p.targets, p.weights).loss -
                 NaiveLmHeadCe(p.rows, p.h, p.v, xm, p.wd, p.targets, p.weights).loss) /
                (2 * eps);
    // Central differences in float64 err by ~eps^2 * |f'''| + 1e-16/eps ~ 1e-10; the
    // analytic value went through one bf16 rounding (2^-8 relative).
    EXPECT_NEAR(got.dx[i].f(), fd, 8e-3 * std::fabs(fd) + 1e-6) << "element " << i;
  }
  // Masked rows (weight 0, target -100) get exactly zero gradient.
  for (int64_t k = 0; k < p.h; ++k) {
    EXPECT_EQ(got.dx[1 * p.h + k].f(), 0.f);
    EXPECT_EQ(got.dx[2 * p.h + k].f(), 0.f);
  }
}

TEST(LmHeadCeCpu, AllMaskedGivesZeroLossAndGradient) {
  Problem p = MakeProblem(3, 8, 13, 9);
  std::fill(p.weights.begin(), p.weights.end(), 0.f);
  Got got = RunCpu(p);
  EXPECT_EQ(got.loss, 0.f);
  for (auto d : got.dx) EXPECT_EQ(d.f(), 0.f);
}

TEST(LmHeadCeCpu, RejectsBadShapes) {
  Problem p = MakeProblem(3, 8, 13, 9);
  float loss;
  Status st = LmHeadCrossEntropy(
      nullptr, TensorView(p.x.data(), DType::kBF16, {3, 8}),
      TensorView(p.w.data(), DType::kBF16, {13, 8}),
      TensorView(p.targets.data(), DType::kI32, {2}),
      TensorView(p.weights.data(), DType::kF32, {3}),
      LmHeadCeOutputs{TensorView(&loss, DType::kF32, {1}), {}, {}, {}, {}, {}}, TensorView(), 4,
      nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("targets"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
