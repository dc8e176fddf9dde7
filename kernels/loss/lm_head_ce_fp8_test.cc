// CPU reference of the FP8 LM head + cross-entropy: against the float64 naive LM head on the
// same inputs (the FP8 error stays within e4m3's bounds and is not zero: the FP8 path ran),
// exact agreement where the operands are e4m3-representable, masked rows, bad arguments, the
// logit transform and top-k against the bf16 head; and the quantized head's transpose.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/loss/lm_head_ce_fp8.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::NaiveLmHeadCe;

struct Problem {
  int64_t rows, h, v;
  std::vector<bf16> x, w;
  std::vector<int32_t> targets;
  std::vector<float> weights;
};

Problem MakeProblem(int64_t rows, int64_t h, int64_t v, uint64_t seed) {
  Problem p;
  p.rows = rows;
  p.h = h;
  p.v = v;
  p.x = testing::RandomBf16(rows * h, seed, -1.f, 1.f);
  p.w = testing::RandomBf16(v * h, seed + 1, -0.5f, 0.5f);
  p.targets = testing::RandomI32(rows, seed + 2, 0, static_cast<int32_t>(v));
  p.weights = testing::RandomF32(rows, seed + 3, 0.25f, 2.f);
  if (rows > 2) {
    p.weights[1] = 0.f;   // masked by weight
    p.targets[2] = -100;  // masked by an out-of-range target
  }
  return p;
}

struct Got {
  float loss = 0;
  std::vector<int32_t> argmax;
  std::vector<uint8_t> correct;
  std::vector<bf16> dx;
  Status status;
};

Got RunFp8(Problem& p, int64_t chunk_rows = 4) {
  Got g;
  auto head = Fp8LmHeadWeights::Quantize(TensorView(p.w.data(), DType::kBF16, {p.v, p.h}),
                                         HostAllocator(), nullptr);
  EXPECT_TRUE(head.ok()) << head.status().ToString();
  g.argmax.resize(p.rows);
  g.correct.resize(p.rows);
  g.dx.resize(p.rows * p.h);
  LmHeadCeOutputs out{TensorView(&g.loss, DType::kF32, {1}),
                      TensorView(g.argmax.data(), DType::kI32, {p.rows}),
                      TensorView(g.correct.data(), DType::kU8, {p.rows}),
                      TensorView(g.dx.data(), DType::kBF16, {p.rows, p.h}), {}, {}};
  g.status = LmHeadCrossEntropyFp8(nullptr, TensorView(p.x.data(), DType::kBF16, {p.rows, p.h}),
                                   head->head(), TensorView(p.targets.data(), DType::kI32, {p.rows}),
                                   TensorView(p.weights.data(), DType::kF32, {p.rows}), out,
                                   TensorView(), chunk_rows, nullptr);
  return g;
}

std::vector<double> ToDouble(const std::vector<bf16>& v) {
  std::vector<double> d;
  for (bf16 x : v) d.push_back(x.f());
  return d;
}

double RelL2(const std::vector<bf16>& got, const std::vector<double>& want) {
  double e = 0, r = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    e += (got[i].f() - want[i]) * (got[i].f() - want[i]);
    r += want[i] * want[i];
  }
  return std::sqrt(e / r);
}

TEST(LmHeadCeFp8Cpu, TracksTheExactLmHeadWithinE4m3Error) {
  for (auto [rows, h, v] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 16, 1001}, {9, 200, 37}, {17, 130, 259}}) {
    SCOPED_TRACE(::testing::Message() << "R=" << rows << " H=" << h << " V=" << v);
    Problem p = MakeProblem(rows, h, v, 300 + rows);
    const auto want = NaiveLmHeadCe(rows, h, v, ToDouble(p.x), ToDouble(p.w), p.targets, p.weights);
    Got got = RunFp8(p);
    ASSERT_TRUE(got.status.ok()) << got.status.ToString();
    // e4m3 keeps 3 mantissa bits: 2^-4 relative per element at worst, averaging down over the
    // H (logits) and V (d hidden) terms of each sum. Measured here: loss within ~0.3%,
    // d hidden within ~3% (relative L2); exactly equal would mean the FP8 path did not run.
    EXPECT_NEAR(got.loss, want.loss, 2e-2 * std::fabs(want.loss));
    EXPECT_NE(got.loss, static_cast<float>(want.loss));
    const double rel = RelL2(got.dx, want.dx);
    EXPECT_LT(rel, 0.08);
    EXPECT_GT(rel, 1e-4);
    for (int64_t r = 0; r < rows; ++r) {
      const bool valid = p.targets[r] >= 0 && p.weights[r] != 0.f;
      EXPECT_EQ(got.correct[r], valid && got.argmax[r] == p.targets[r]) << "row " << r;
      if (valid) continue;
      for (int64_t k = 0; k < h; ++k) ASSERT_EQ(got.dx[r * h + k].f(), 0.f) << "masked row " << r;
    }
  }
}

// Operands whose every 128-group (rows of x, blocks of W) holds a +-1 and otherwise values of
// {0, +-1/8, +-1/4, +-1/2}: every scale is 1/448 and every value an exact e4m3 code, so the
// logits are the exact ones (up to the bf16 rounding of each logit and fl(1/448)).
TEST(LmHeadCeFp8Cpu, ExactForE4m3RepresentableOperands) {
  const int64_t rows = 6, h = 136, v = 140;
  Problem p = MakeProblem(rows, h, v, 41);
  const float levels[] = {0.f, 0.125f, -0.125f, 0.25f, -0.25f, 0.5f, -0.5f};
  for (int64_t i = 0; i < rows * h; ++i) p.x[i] = bf16(levels[(i * 7 + 3) % 7]);
  for (int64_t i = 0; i < v * h; ++i) p.w[i] = bf16(0.5f * levels[(i * 5 + 1) % 7]);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < h; c += 128) p.x[r * h + c] = bf16(1.f);
  for (int64_t r = 0; r < v; r += 128)
    for (int64_t c = 0; c < h; c += 128) p.w[r * h + c] = bf16(1.f);
  const auto want = NaiveLmHeadCe(rows, h, v, ToDouble(p.x), ToDouble(p.w), p.targets, p.weights);
  Got got = RunFp8(p, 2048);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  // bf16 logits: |logit| <= ~10 here, so each is off by <= 2^-9 * 10; the loss by as much.
  EXPECT_NEAR(got.loss, want.loss, 2e-2);
  // d hidden: g goes through bf16 and e4m3 (not representable in general), so only the
  // e4m3 bound applies; it is still close.
  EXPECT_LT(RelL2(got.dx, want.dx), 0.08);
}

TEST(LmHeadCeFp8Cpu, ChunkingDoesNotChangeTheResult) {
  Problem p = MakeProblem(11, 144, 80, 5);
  Got a = RunFp8(p, 3), b = RunFp8(p, 2048);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_FLOAT_EQ(a.loss, b.loss);
  for (size_t i = 0; i < a.dx.size(); ++i) ASSERT_EQ(a.dx[i].bits, b.dx[i].bits) << i;
}

TEST(LmHeadCeFp8Cpu, AllMaskedGivesZeroLossAndGradient) {
  Problem p = MakeProblem(3, 16, 13, 9);
  std::fill(p.weights.begin(), p.weights.end(), 0.f);
  Got got = RunFp8(p);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.loss, 0.f);
  for (auto d : got.dx) EXPECT_EQ(d.f(), 0.f);
}

TEST(LmHeadCeFp8Cpu, RejectsAHeadOfAnotherShape) {
  Problem p = MakeProblem(3, 16, 13, 9), q = MakeProblem(3, 32, 13, 9);
  auto head = Fp8LmHeadWeights::Quantize(TensorView(q.w.data(), DType::kBF16, {13, 32}),
                                         HostAllocator(), nullptr);
  ASSERT_TRUE(head.ok());
  float loss;
  Status st = LmHeadCrossEntropyFp8(
      nullptr, TensorView(p.x.data(), DType::kBF16, {3, 16}), head->head(),
      TensorView(p.targets.data(), DType::kI32, {3}), TensorView(p.weights.data(), DType::kF32, {3}),
      LmHeadCeOutputs{TensorView(&loss, DType::kF32, {1}), {}, {}, {}, {}, {}}, TensorView(), 4,
      nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("does not match the FP8 LM head"), std::string::npos)
      << st.ToString();
}

// DFlash2's logit transform and top-k: the FP8 head against the bf16 head (lm_head_ce.h, itself
// checked against float64) with the same transform, within the e4m3 bounds of the test above.
// The top-k values are compared rank by rank: a rank's value moves by at most the logits'
// error even where near-equal logits trade places.
struct TopKRun {
  float loss = 0;
  std::vector<bf16> dx;
  std::vector<int32_t> ids;
  std::vector<float> values;
  Status status;
};

TopKRun RunWithTopK(Problem& p, int64_t k, const LmHeadCeTransform& t, bool fp8) {
  TopKRun g;
  g.dx.resize(p.rows * p.h);
  g.ids.resize(p.rows * k);
  g.values.resize(p.rows * k);
  LmHeadCeOutputs out;
  out.loss = TensorView(&g.loss, DType::kF32, {1});
  out.dhidden = TensorView(g.dx.data(), DType::kBF16, {p.rows, p.h});
  out.topk_ids = TensorView(g.ids.data(), DType::kI32, {p.rows, k});
  out.topk_values = TensorView(g.values.data(), DType::kF32, {p.rows, k});
  const TensorView x(p.x.data(), DType::kBF16, {p.rows, p.h}), w(p.w.data(), DType::kBF16, {p.v, p.h}),
      tgt(p.targets.data(), DType::kI32, {p.rows}), rw(p.weights.data(), DType::kF32, {p.rows});
  if (!fp8) {
    g.status = LmHeadCrossEntropy(nullptr, x, w, tgt, rw, out, TensorView(), 4, nullptr, t);
    return g;
  }
  auto head = Fp8LmHeadWeights::Quantize(w, HostAllocator(), nullptr);
  EXPECT_TRUE(head.ok()) << head.status().ToString();
  g.status = LmHeadCrossEntropyFp8(nullptr, x, head->head(), tgt, rw, out, TensorView(), 4,
                                   nullptr, t);
  return g;
}

TEST(LmHeadCeFp8Cpu, TransformAndTopKTrackTheBf16Head) {
  const LmHeadCeTransform t{0.8f, 6.0f};
  for (auto [rows, h, v, k] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {5, 16, 1001, 16}, {9, 200, 37, 37}, {17, 130, 259, 1}}) {
    SCOPED_TRACE(::testing::Message() << "R=" << rows << " H=" << h << " V=" << v << " k=" << k);
    Problem p = MakeProblem(rows, h, v, 700 + rows);
    TopKRun want = RunWithTopK(p, k, t, false), got = RunWithTopK(p, k, t, true);
    ASSERT_TRUE(want.status.ok()) << want.status.ToString();
    ASSERT_TRUE(got.status.ok()) << got.status.ToString();
    EXPECT_NEAR(got.loss, want.loss, 2e-2 * std::fabs(want.loss));
    std::vector<double> want_dx = ToDouble(want.dx);
    const double rel = RelL2(got.dx, want_dx);
    EXPECT_LT(rel, 0.08);
    EXPECT_GT(rel, 1e-4);  // the FP8 path ran
    for (int64_t r = 0; r < rows; ++r) {
      // e4m3 rounds each operand by at most 2^-4 relative, so a logit moves by at most
      // 2^-3 sum_i |x_i w_i| (plus its bf16 rounding), and the transform's slope is <= m.
      double worst = 0;
      for (int64_t c = 0; c < v; ++c) {
        double sum = 0;
        for (int64_t i = 0; i < h; ++i) sum += std::fabs(p.x[r * h + i].f() * p.w[c * h + i].f());
        worst = std::max(worst, sum);
      }
      const double bound = t.multiplier * 0.125 * worst;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = r * k + j;
        EXPECT_NEAR(got.values[i], want.values[i], bound + 1e-2 * std::fabs(want.values[i]))
            << "row " << r << " rank " << j;
        if (j > 0) EXPECT_GE(got.values[i - 1], got.values[i]);  // best first
        EXPECT_LT(std::fabs(got.values[i]), 6.0f);               // under the soft cap
      }
    }
    // The transform changed the result: the same head without it gives another loss.
    TopKRun plain = RunWithTopK(p, k, LmHeadCeTransform{}, true);
    ASSERT_TRUE(plain.status.ok());
    EXPECT_GT(std::fabs(plain.loss - got.loss), 1e-3);
  }
}

TEST(LmHeadCeFp8Cpu, RefusesABadTransform) {
  Problem p = MakeProblem(3, 16, 13, 9);
  TopKRun got = RunWithTopK(p, 4, LmHeadCeTransform{0.0f, 0.0f}, true);
  EXPECT_EQ(got.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status.message().find("multiplier"), std::string::npos) << got.status.ToString();
}

}  // namespace
}  // namespace tandem::kernels
