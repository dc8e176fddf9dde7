// CPU tests of RMSNorm: the fp32 op against a float64 reference, the float64 backward
// against finite differences, per-head shapes, and argument errors.
#include "kernels/norm/rmsnorm.h"

#include <gtest/gtest.h>

#include "kernels/norm/rmsnorm_ref.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::ToDouble;

// One bf16 rounding is at most 2^-9 relative; 2^-8 leaves room for fp32 noise before it.
constexpr double kBf16Rtol = 1.0 / 256;

struct Case {
  int64_t rows, h;
};

class RmsNormCpuTest : public ::testing::TestWithParam<Case> {};

TEST_P(RmsNormCpuTest, ForwardAndBackwardMatchFloat64) {
  const auto [rows, h] = GetParam();
  const float eps = 1e-6f;
  std::vector<bf16> x = RandomBf16(rows * h, 1, -2.f, 2.f), w = RandomBf16(h, 2, 0.5f, 1.5f);
  std::vector<bf16> dy = RandomBf16(rows * h, 3), y(rows * h), dx(rows * h);
  std::vector<float> rstd(rows), dw(h, 0.25f);  // dw accumulates onto 0.25
  TensorView vx(x.data(), DType::kBF16, {rows, h}), vw(w.data(), DType::kBF16, {h}),
      vy(y.data(), DType::kBF16, {rows, h}), vr(rstd.data(), DType::kF32, {rows}),
      vdy(dy.data(), DType::kBF16, {rows, h}), vdx(dx.data(), DType::kBF16, {rows, h}),
      vdw(dw.data(), DType::kF32, {h});
  ASSERT_TRUE(RmsNormForward(vy, vr, vx, vw, eps, nullptr).ok());
  ASSERT_TRUE(RmsNormBackward(vdx, vdw, vdy, vx, vw, vr, TensorView(), nullptr).ok());

  std::vector<double> xd = ToDouble(x), wd = ToDouble(w), dyd = ToDouble(dy);
  std::vector<double> yd(rows * h), rd(rows), dxd(rows * h), dwd(h, 0.25);
  ref::RmsNormForward<double>(yd.data(), rd.data(), xd.data(), wd.data(), rows, h, eps);
  ref::RmsNormBackward<double>(dxd.data(), dwd.data(), dyd.data(), xd.data(), wd.data(), rd.data(),
                               rows, h);
  EXPECT_TRUE(AllClose(ToDouble(y), yd, 1e-6, kBf16Rtol, "y"));
  EXPECT_TRUE(AllClose(ToDouble(rstd), rd, 0, 1e-5, "rstd"));  // fp32 sum of <= 5120 squares
  // dx = rstd * (g - x*c) cancels terms of size ~1; fp32 leaves ~1e-6 absolute before rounding.
  EXPECT_TRUE(AllClose(ToDouble(dx), dxd, 1e-5, kBf16Rtol, "dx"));
  // dw sums `rows` terms dy*x*rstd of size <= ~2, each carrying rstd's fp32 relative error
  // (<= ~1e-5 from a sum of up to 5120 squares, ~1e-6 typical): 1e-5 absolute per row.
  EXPECT_TRUE(AllClose(ToDouble(dw), dwd, 1e-5 * rows, 1e-5, "dw"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormCpuTest,
                         ::testing::Values(Case{1, 1}, Case{3, 7}, Case{5, 127}, Case{2, 4104},
                                           Case{64, 128}, Case{3, 5120}));

TEST(RmsNormRefTest, BackwardMatchesFiniteDifferencesInFloat64) {
  const int64_t rows = 3, h = 6;
  const double eps = 1e-6;
  std::vector<double> x = ToDouble(testing::RandomFloats(rows * h, 4, -2, 2));
  std::vector<double> w = ToDouble(testing::RandomFloats(h, 5, 0.5, 1.5));
  std::vector<double> probe = ToDouble(testing::RandomFloats(rows * h, 6));
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
    std::vector<double> y(rows * h);
    ref::RmsNormForward<double>(y.data(), nullptr, xx.data(), ww.data(), rows, h, eps);
    return testing::Dot(y, probe);
  };
  std::vector<double> y(rows * h), rstd(rows), dx(rows * h), dw(h, 0.0);
  ref::RmsNormForward<double>(y.data(), rstd.data(), x.data(), w.data(), rows, h, eps);
  ref::RmsNormBackward<double>(dx.data(), dw.data(), probe.data(), x.data(), w.data(), rstd.data(),
                               rows, h);
  auto num_dx = testing::NumericalGradient([&](const auto& v) { return loss(v, w); }, x);
  auto num_dw = testing::NumericalGradient([&](const auto& v) { return loss(x, v); }, w);
  // Central differences with h = 1e-6 in float64: truncation ~1e-12, round-off ~1e-10.
  EXPECT_TRUE(AllClose(dx, num_dx, 1e-7, 1e-6, "dx"));
  EXPECT_TRUE(AllClose(dw, num_dw, 1e-7, 1e-6, "dw"));
}

TEST(RmsNormCpuTest, PerHeadShapeNormalisesEachHead) {
  const int64_t t = 3, heads = 4, d = 8;
  std::vector<bf16> x = RandomBf16(t * heads * d, 7), w = RandomBf16(d, 8, 0.5f, 1.5f);
  std::vector<bf16> y3(x.size()), y2(x.size());
  ASSERT_TRUE(RmsNormForward(TensorView(y3.data(), DType::kBF16, {t, heads, d}), TensorView(),
                             TensorView(x.data(), DType::kBF16, {t, heads, d}),
                             TensorView(w.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  ASSERT_TRUE(RmsNormForward(TensorView(y2.data(), DType::kBF16, {t * heads, d}), TensorView(),
                             TensorView(x.data(), DType::kBF16, {t * heads, d}),
                             TensorView(w.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  EXPECT_TRUE(testing::BitEqual(y3, y2));
  // Each head has mean square ~1 after the norm (w = 1 would give exactly 1).
  std::vector<bf16> ones(d, bf16(1.f));
  ASSERT_TRUE(RmsNormForward(TensorView(y3.data(), DType::kBF16, {t, heads, d}), TensorView(),
                             TensorView(x.data(), DType::kBF16, {t, heads, d}),
                             TensorView(ones.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  for (int64_t r = 0; r < t * heads; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += y3[r * d + i].f() * y3[r * d + i].f();
    EXPECT_NEAR(ss / d, 1.0, 0.01) << "head row " << r;
  }
}

TEST(RmsNormCpuTest, RejectsBadArguments) {
  std::vector<bf16> x(12), y(12), w(4);
  std::vector<float> xf(12);
  TensorView vx(x.data(), DType::kBF16, {3, 4}), vy(y.data(), DType::kBF16, {3, 4});
  Status s =
      RmsNormForward(vy, TensorView(), vx, TensorView(w.data(), DType::kBF16, {3}), 1e-6f, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("RmsNormForward: w"), std::string::npos) << s.message();
  s = RmsNormForward(vy, TensorView(), TensorView(xf.data(), DType::kF32, {3, 4}),
                     TensorView(w.data(), DType::kBF16, {4}), 1e-6f, nullptr);
  EXPECT_NE(s.message().find("expected bf16"), std::string::npos) << s.message();
#ifndef TANDEM_HAVE_CUDA
  s = RmsNormForward(TensorView(y.data(), DType::kBF16, {3, 4}, Device::Cuda(0)), TensorView(),
                     TensorView(x.data(), DType::kBF16, {3, 4}, Device::Cuda(0)),
                     TensorView(w.data(), DType::kBF16, {4}, Device::Cuda(0)), 1e-6f, nullptr);
  EXPECT_NE(s.message().find("built without CUDA"), std::string::npos) << s.message();
#endif
}

}  // namespace
}  // namespace tandem::kernels
