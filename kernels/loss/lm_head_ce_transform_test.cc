// cpu::LmHeadCrossEntropy with a logit transform (multiplier, soft cap) and the row top-k
// outputs, against a float64 reference whose analytic gradient is itself checked by finite
// differences; the identity transform against the plain call; top-k ties and argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/loss/lm_head_ce.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;

// Passes when every |got - want| <= atol + rtol * |want|; names the worst element otherwise.
::testing::AssertionResult Close(const std::vector<double>& got, const std::vector<double>& want,
                                 double atol, double rtol, const char* what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": size";
  size_t worst = 0, bad = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double excess = std::fabs(got[i] - want[i]) - (atol + rtol * std::fabs(want[i]));
    if (!(excess <= 0)) ++bad;
    if (!(excess <= worst_excess)) worst_excess = excess, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " elements off, worst [" << worst
                                       << "] got " << got[worst] << " want " << want[worst];
}

struct Ref {
  double loss = 0;
  std::vector<double> z;   // [R, V] transformed logits
  std::vector<double> dx;  // [R, H]
};

// Float64: z = T(x . W^T), weighted CE over z, dx = sum_j (p_j - [j == t]) * w / W * T'_j W_j.
Ref Reference(int64_t rows, int64_t h, int64_t v, const std::vector<double>& x,
              const std::vector<double>& w, const std::vector<int32_t>& tgt,
              const std::vector<float>& rw, double m, double cap) {
  Ref out;
  out.z.resize(rows * v);
  out.dx.assign(rows * h, 0.0);
  double wsum = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (tgt[r] >= 0 && tgt[r] < v) wsum += rw[r];
  std::vector<double> slope(v);
  for (int64_t r = 0; r < rows; ++r) {
    double* z = &out.z[r * v];
    for (int64_t j = 0; j < v; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < h; ++i) acc += x[r * h + i] * w[j * h + i];
      z[j] = cap > 0 ? cap * std::tanh(m * acc / cap) : m * acc;
      slope[j] = cap > 0 ? m * (1 - (z[j] / cap) * (z[j] / cap)) : m;
    }
    if (tgt[r] < 0 || tgt[r] >= v || rw[r] == 0 || wsum == 0) continue;
    const double mx = *std::max_element(z, z + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(z[j] - mx);
    const double lse = mx + std::log(sum);
    out.loss += rw[r] * (lse - z[tgt[r]]) / wsum;
    for (int64_t j = 0; j < v; ++j) {
      const double g = (std::exp(z[j] - lse) - (j == tgt[r])) * rw[r] / wsum * slope[j];
      for (int64_t i = 0; i < h; ++i) out.dx[r * h + i] += g * w[j * h + i];
    }
  }
  return out;
}

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
  p.w = RandomBf16(v * h, seed + 1, -1.f, 1.f);
  p.targets = testing::RandomI32(rows, seed + 2, 0, static_cast<int32_t>(v));
  p.weights = testing::RandomF32(rows, seed + 3, 0.25f, 2.f);
  if (rows > 2) {
    p.weights[1] = 0.f;
    p.targets[2] = -100;
  }
  for (bf16 b : p.x) p.xd.push_back(b.f());
  for (bf16 b : p.w) p.wd.push_back(b.f());
  return p;
}

TEST(LmHeadCeTransformCpu, ReferenceGradientMatchesFiniteDifferences) {
  Problem p = MakeProblem(3, 4, 6, 5);
  for (auto [m, cap] : {std::pair{1.5, 0.0}, std::pair{2.0, 1.5}}) {
    Ref ref = Reference(p.rows, p.h, p.v, p.xd, p.wd, p.targets, p.weights, m, cap);
    auto loss = [&](const std::vector<double>& x) {
      return Reference(p.rows, p.h, p.v, x, p.wd, p.targets, p.weights, m, cap).loss;
    };
    std::vector<double> numeric(p.xd.size()), x = p.xd;
    for (size_t i = 0; i < x.size(); ++i) {  // central differences
      const double h = 1e-6, keep = x[i];
      x[i] = keep + h;
      const double up = loss(x);
      x[i] = keep - h;
      numeric[i] = (up - loss(x)) / (2 * h);
      x[i] = keep;
    }
    EXPECT_TRUE(Close(numeric, ref.dx, 1e-7, 1e-5, "dx"));
  }
}

struct Got {
  float loss = 0;
  std::vector<int32_t> argmax, topk;
  std::vector<uint8_t> correct;
  std::vector<float> topv;
  std::vector<bf16> dx;
};

Got RunCpu(Problem& p, int64_t k, LmHeadCeTransform t, int64_t chunk = 4) {
  Got g;
  g.argmax.resize(p.rows);
  g.correct.resize(p.rows);
  g.dx.resize(p.rows * p.h);
  g.topk.resize(p.rows * k);
  g.topv.resize(p.rows * k);
  LmHeadCeOutputs out{TensorView(&g.loss, DType::kF32, {1}),
                      TensorView(g.argmax.data(), DType::kI32, {p.rows}),
                      TensorView(g.correct.data(), DType::kU8, {p.rows}),
                      TensorView(g.dx.data(), DType::kBF16, {p.rows, p.h}),
                      {},
                      {}};
  if (k > 0) {
    out.topk_ids = TensorView(g.topk.data(), DType::kI32, {p.rows, k});
    out.topk_values = TensorView(g.topv.data(), DType::kF32, {p.rows, k});
  }
  Status st = cpu::LmHeadCrossEntropy(nullptr, TensorView(p.x.data(), DType::kBF16, {p.rows, p.h}),
                                      TensorView(p.w.data(), DType::kBF16, {p.v, p.h}),
                                      TensorView(p.targets.data(), DType::kI32, {p.rows}),
                                      TensorView(p.weights.data(), DType::kF32, {p.rows}), out,
                                      TensorView(), chunk, nullptr, t);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return g;
}

TEST(LmHeadCeTransformCpu, MatchesFloat64Reference) {
  for (auto [rows, h, v, k, m, cap] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, float, float>>{
           {5, 16, 37, 5, 1.f, 0.f},
           {9, 33, 101, 64, 0.75f, 0.f},
           {7, 24, 77, 3, 2.f, 3.f},
           {4, 8, 9, 9, 0.5f, 1.f}}) {
    SCOPED_TRACE(::testing::Message() << "R=" << rows << " H=" << h << " V=" << v << " k=" << k
                                      << " m=" << m << " cap=" << cap);
    Problem p = MakeProblem(rows, h, v, 40 + rows);
    Ref ref = Reference(rows, h, v, p.xd, p.wd, p.targets, p.weights, m, cap);
    Got got = RunCpu(p, k, {m, cap});
    // fp32 logits over H <= 33 exact bf16 products (~1e-6), tanh in fp32: the rest float64.
    EXPECT_NEAR(got.loss, ref.loss, 1e-5 * (1 + std::fabs(ref.loss)));
    std::vector<double> dx;
    for (bf16 b : got.dx) dx.push_back(b.f());
    EXPECT_TRUE(Close(dx, ref.dx, 1e-5, 1.0 / 128, "dhidden"));
    for (int64_t r = 0; r < rows; ++r) {
      const double* z = &ref.z[r * v];
      std::vector<int32_t> order(v);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return z[a] > z[b]; });
      EXPECT_EQ(got.argmax[r], order[0]) << "row " << r;
      for (int64_t i = 0; i < k; ++i) {
        EXPECT_EQ(got.topk[r * k + i], order[i]) << "row " << r << " rank " << i;
        EXPECT_NEAR(got.topv[r * k + i], z[order[i]], 1e-5 * (1 + std::fabs(z[order[i]])));
      }
    }
  }
}

TEST(LmHeadCeTransformCpu, IdentityIsThePlainCall) {
  Problem p = MakeProblem(6, 16, 40, 9);
  Got a = RunCpu(p, 0, {});
  Got b = RunCpu(p, 0, {1.f, 0.f}, 3);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.argmax, b.argmax);
  for (size_t i = 0; i < a.dx.size(); ++i) ASSERT_EQ(a.dx[i].bits, b.dx[i].bits) << i;
}

// Rows whose logits tie exactly (identical hidden rows and two identical weight rows): the
// lower id first.
TEST(LmHeadCeTransformCpu, TopKTiesByLowerId) {
  Problem p = MakeProblem(2, 8, 12, 3);
  for (int64_t i = 0; i < p.h; ++i) {
    p.w[7 * p.h + i] = p.w[2 * p.h + i];
    p.w[10 * p.h + i] = p.w[2 * p.h + i];
  }
  Got g = RunCpu(p, 12, {1.f, 2.f});
  for (int64_t r = 0; r < p.rows; ++r) {
    const int32_t* ids = &g.topk[r * 12];
    auto at = [&](int32_t id) { return std::find(ids, ids + 12, id) - ids; };
    EXPECT_LT(at(2), at(7));
    EXPECT_EQ(at(7) - at(2), 1);
    EXPECT_EQ(at(10) - at(7), 1);
    for (int i = 1; i < 12; ++i) EXPECT_GE(g.topv[r * 12 + i - 1], g.topv[r * 12 + i]);
  }
}

TEST(LmHeadCeTransformCpu, RejectsBadArguments) {
  Problem p = MakeProblem(3, 8, 10, 1);
  float loss = 0;
  std::vector<int32_t> ids(3 * 11);
  std::vector<float> vals(3 * 11);
  auto run = [&](int64_t k, LmHeadCeTransform t, bool with_ids = true) {
    LmHeadCeOutputs out;
    out.loss = TensorView(&loss, DType::kF32, {1});
    if (with_ids) out.topk_ids = TensorView(ids.data(), DType::kI32, {3, k});
    out.topk_values = TensorView(vals.data(), DType::kF32, {3, k});
    return cpu::LmHeadCrossEntropy(nullptr, TensorView(p.x.data(), DType::kBF16, {3, 8}),
                                   TensorView(p.w.data(), DType::kBF16, {10, 8}),
                                   TensorView(p.targets.data(), DType::kI32, {3}),
                                   TensorView(p.weights.data(), DType::kF32, {3}), out,
                                   TensorView(), 2, nullptr, t);
  };
  EXPECT_TRUE(run(10, {}).ok());
  EXPECT_FALSE(run(11, {}).ok());          // k > V
  EXPECT_FALSE(run(3, {}, false).ok());    // values without ids
  EXPECT_FALSE(run(3, {0.f, 0.f}).ok());   // multiplier must be > 0
  EXPECT_FALSE(run(3, {1.f, -2.f}).ok());  // softcap must be >= 0
}

}  // namespace
}  // namespace tandem::kernels
