// The hybrid layers' small ops (hybrid_ops.h) against float64 formulas written out here, on
// odd shapes, strided row views and packed documents.
#include "kernels/linear_attention/hybrid_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/norm/rmsnorm.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::RandomBf16;

double Sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// bf16 outputs: one rounding of an fp32 computation of the same value.
constexpr double kAtol = 1e-5, kRtol = 8e-3;

TensorView Rows(std::vector<bf16>& data, int64_t rows, int64_t stride, int64_t cols,
                int64_t col0 = 0) {
  return TensorView(data.data(), DType::kBF16, {rows, stride}).Narrow(1, col0, cols);
}

std::vector<double> Gather(const std::vector<bf16>& out, int64_t rows, int64_t stride, int64_t cols,
                           int64_t col0 = 0) {
  std::vector<double> r;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r.push_back(out[i * stride + col0 + j].f());
  return r;
}

TEST(CausalConv1dSiluTest, MatchesPaddedConvPerDocument) {
  // C 5 channels read from columns [2, 7) of rows of 9; K 4; documents 1, 2, 7, 3, 4.
  const int64_t c = 5, k = 4, stride = 9;
  std::vector<int32_t> cu = {0, 1, 3, 10, 13, 17};
  const int64_t t = cu.back();
  std::vector<bf16> x = RandomBf16(t * stride, 1, -2.f, 2.f), w = RandomBf16(c * k, 2);
  std::vector<bf16> out(t * 6);
  TensorView cu_v(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
  ASSERT_TRUE(CausalConv1dSiluForward(Rows(out, t, 6, c, 1), Rows(x, t, stride, c, 2),
                                      TensorView(w.data(), DType::kBF16, {c, k}), cu_v, nullptr)
                  .ok());
  // Per document: K-1 zeros in front (F.conv1d padding), then out[i] = sum_j w[j] xp[i + j].
  std::vector<double> want;
  for (size_t d = 0; d + 1 < cu.size(); ++d) {
    const int64_t len = cu[d + 1] - cu[d];
    for (int64_t i = 0; i < len; ++i)
      for (int64_t ch = 0; ch < c; ++ch) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t pi = i + j - (k - 1);
          if (pi >= 0) acc += w[ch * k + j].f() * x[(cu[d] + pi) * stride + 2 + ch].f();
        }
        want.push_back(acc * Sig(acc));
      }
  }
  EXPECT_TRUE(AllClose(Gather(out, t, 6, c, 1), want, kAtol, kRtol, "conv"));
}

TEST(CausalConv1dSiluTest, StateRestartsAtDocumentStart) {
  // The same 6 tokens as one document and as 3 + 3: only rows 3..5 may differ, and the second
  // split document equals its tokens run alone.
  const int64_t c = 3, k = 4;
  std::vector<bf16> x = RandomBf16(6 * c, 5), w = RandomBf16(c * k, 6);
  auto run = [&](std::vector<int32_t> cu, std::vector<bf16>& xs, int64_t t) {
    std::vector<bf16> out(t * c);
    TensorView cu_v(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
    EXPECT_TRUE(CausalConv1dSiluForward(TensorView(out.data(), DType::kBF16, {t, c}),
                                        TensorView(xs.data(), DType::kBF16, {t, c}),
                                        TensorView(w.data(), DType::kBF16, {c, k}), cu_v, nullptr)
                    .ok());
    return out;
  };
  const std::vector<bf16> one = run({0, 6}, x, 6), split = run({0, 3, 6}, x, 6);
  std::vector<bf16> tail(x.begin() + 3 * c, x.end());
  const std::vector<bf16> alone = run({0, 3}, tail, 3);
  for (int64_t i = 0; i < 3 * c; ++i) EXPECT_EQ(one[i].bits, split[i].bits);
  for (int64_t i = 0; i < 3 * c; ++i) EXPECT_EQ(split[3 * c + i].bits, alone[i].bits);
  bool differs = false;
  for (int64_t i = 3 * c; i < 6 * c; ++i) differs |= one[i].bits != split[i].bits;
  EXPECT_TRUE(differs) << "the split must change the rows after the boundary";
}

TEST(GatedDeltaGatesTest, Formula) {
  const int64_t t = 3, h = 5, stride = 12;
  std::vector<bf16> ab = RandomBf16(t * stride, 3, -4.f, 4.f);
  std::vector<bf16> a_log = RandomBf16(h, 4, -2.f, 2.f), dt = RandomBf16(h, 5, -1.f, 2.f);
  std::vector<float> g(t * h), beta(t * h);
  ASSERT_TRUE(GatedDeltaGates(TensorView(g.data(), DType::kF32, {t, h}),
                              TensorView(beta.data(), DType::kF32, {t, h}),
                              Rows(ab, t, stride, h, 6), Rows(ab, t, stride, h, 1),
                              TensorView(a_log.data(), DType::kBF16, {h}),
                              TensorView(dt.data(), DType::kBF16, {h}), nullptr)
                  .ok());
  std::vector<double> want_g, want_beta, got_g(g.begin(), g.end()),
      got_beta(beta.begin(), beta.end());
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < h; ++j) {
      const double a = ab[i * stride + 6 + j].f(), b = ab[i * stride + 1 + j].f();
      want_g.push_back(-std::exp(a_log[j].f()) * std::log1p(std::exp(a + dt[j].f())));
      want_beta.push_back(Sig(b));
    }
  EXPECT_TRUE(AllClose(got_g, want_g, 1e-6, 1e-5, "g"));
  EXPECT_TRUE(AllClose(got_beta, want_beta, 1e-6, 1e-5, "beta"));
}

TEST(GatedRmsNormTest, PerHeadNormTimesWeightTimesSiluGate) {
  const int64_t t = 7, heads = 3, d = 6, zs = 25;
  std::vector<bf16> x = RandomBf16(t * heads * d, 8, -3.f, 3.f),
                    z = RandomBf16(t * zs, 9, -3.f, 3.f);
  std::vector<bf16> w = RandomBf16(d, 10, 0.5f, 1.5f), out(t * heads * d);
  ASSERT_TRUE(GatedRmsNormForward(TensorView(out.data(), DType::kBF16, {t, heads * d}),
                                  TensorView(x.data(), DType::kBF16, {t, heads * d}),
                                  Rows(z, t, zs, heads * d, 4),
                                  TensorView(w.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  std::vector<double> want;
  for (int64_t i = 0; i < t; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      double ss = 0;
      for (int64_t j = 0; j < d; ++j) ss += std::pow(x[(i * heads + h) * d + j].f(), 2);
      const double rstd = 1.0 / std::sqrt(ss / d + 1e-6);
      for (int64_t j = 0; j < d; ++j) {
        const double zz = z[i * zs + 4 + h * d + j].f();
        want.push_back(x[(i * heads + h) * d + j].f() * rstd * w[j].f() * zz * Sig(zz));
      }
    }
  EXPECT_TRUE(AllClose(Gather(out, t, heads * d, heads * d), want, kAtol, kRtol, "gated norm"));
}

TEST(ZeroCentredRmsNormTest, OnePlusWeightOnStridedRows) {
  // The query half of [rows, 2d] rows (q | gate per head), as in the gated attention.
  const int64_t rows = 11, d = 9;
  std::vector<bf16> x = RandomBf16(rows * 2 * d, 11, -2.f, 2.f), w = RandomBf16(d, 12, -0.3f, 0.3f);
  std::vector<bf16> out(rows * d);
  ASSERT_TRUE(ZeroCentredRmsNormForward(TensorView(out.data(), DType::kBF16, {rows, d}),
                                        Rows(x, rows, 2 * d, d),
                                        TensorView(w.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  std::vector<double> want;
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += std::pow(x[i * 2 * d + j].f(), 2);
    for (int64_t j = 0; j < d; ++j)
      want.push_back(x[i * 2 * d + j].f() / std::sqrt(ss / d + 1e-6) * (1.0 + w[j].f()));
  }
  EXPECT_TRUE(AllClose(Gather(out, rows, d, d), want, kAtol, kRtol, "zero-centred norm"));
}

TEST(ZeroCentredRmsNormTest, ZeroWeightIsPlainRmsNormWithUnitWeight) {
  const int64_t rows = 5, d = 13;
  std::vector<bf16> x = RandomBf16(rows * d, 13), zero(d, bf16(0.f)), one(d, bf16(1.f));
  std::vector<bf16> a(rows * d), b(rows * d);
  const TensorView xv(x.data(), DType::kBF16, {rows, d});
  ASSERT_TRUE(ZeroCentredRmsNormForward(TensorView(a.data(), DType::kBF16, {rows, d}), xv,
                                        TensorView(zero.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  ASSERT_TRUE(RmsNormForward(TensorView(b.data(), DType::kBF16, {rows, d}), {}, xv,
                             TensorView(one.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  EXPECT_TRUE(testing::BitEqual(a, b));
}

TEST(SigmoidGateTest, GateFromStridedColumnsInPlace) {
  const int64_t rows = 6, cols = 7;
  std::vector<bf16> x = RandomBf16(rows * cols, 14, -3.f, 3.f),
                    g = RandomBf16(rows * 2 * cols, 15, -4.f, 4.f);
  const std::vector<bf16> x0 = x;
  const TensorView xv(x.data(), DType::kBF16, {rows, cols});
  ASSERT_TRUE(SigmoidGateForward(xv, xv, Rows(g, rows, 2 * cols, cols, cols), nullptr).ok());
  std::vector<double> want;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      want.push_back(x0[i * cols + j].f() * Sig(g[i * 2 * cols + cols + j].f()));
  EXPECT_TRUE(AllClose(Gather(x, rows, cols, cols), want, kAtol, kRtol, "sigmoid gate"));
}

TEST(HybridOpsTest, RejectsBadViews) {
  std::vector<bf16> x(24), w(4);
  // A column-strided view (a transposed matrix) is not a row view.
  const TensorView t = TensorView(x.data(), DType::kBF16, {4, 6}).Narrow(1, 0, 3);
  Status st =
      ZeroCentredRmsNormForward(t, t, TensorView(w.data(), DType::kBF16, {4}), 1e-6f, nullptr);
  EXPECT_NE(st.message().find("w:"), std::string::npos) << st.ToString();
  std::vector<float> f(24);
  st = SigmoidGateForward(t, TensorView(f.data(), DType::kF32, {4, 3}), t, nullptr);
  EXPECT_NE(st.message().find("x:"), std::string::npos) << st.ToString();
  std::vector<int32_t> cu = {0, 5};  // T is 4
  st = CausalConv1dSiluForward(t, t, TensorView(w.data(), DType::kBF16, {3, 1}),
                               TensorView(cu.data(), DType::kI32, {2}), nullptr);
  EXPECT_NE(st.message().find("cu_seqlens"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
