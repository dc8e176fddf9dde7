// CPU tests of SwiGLU: float64 reference, fused [rows, 2I] input, finite differences.
#include "kernels/mlp/swiglu.h"

#include <gtest/gtest.h>

#include "kernels/mlp/swiglu_ref.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::ToDouble;

constexpr double kBf16Rtol = 1.0 / 256;  // one bf16 rounding (2^-9) plus fp32 noise

TEST(SwiGluCpuTest, FusedAndSeparateMatchFloat64) {
  const int64_t rows = 7, inter = 13;
  std::vector<bf16> gu = testing::RandomBf16(rows * 2 * inter, 1, -6, 6);
  std::vector<bf16> dout = testing::RandomBf16(rows * inter, 2), out(rows * inter);
  std::vector<bf16> dgu(rows * 2 * inter);
  TensorView vgu(gu.data(), DType::kBF16, {rows, 2 * inter});
  TensorView vdgu(dgu.data(), DType::kBF16, {rows, 2 * inter});
  auto [g, u] = SplitGateUp(vgu);
  auto [dg, du] = SplitGateUp(vdgu);
  TensorView vo(out.data(), DType::kBF16, {rows, inter}),
      vd(dout.data(), DType::kBF16, {rows, inter});
  ASSERT_TRUE(SwiGluForward(vo, g, u, nullptr).ok());
  ASSERT_TRUE(SwiGluBackward(dg, du, vd, g, u, nullptr).ok());

  std::vector<double> gd(rows * inter), ud(rows * inter), want(rows * inter), wdg(rows * inter),
      wdu(rows * inter), got_dg(rows * inter), got_du(rows * inter);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < inter; ++c) {
      gd[r * inter + c] = gu[r * 2 * inter + c].f();
      ud[r * inter + c] = gu[r * 2 * inter + inter + c].f();
      got_dg[r * inter + c] = dgu[r * 2 * inter + c].f();
      got_du[r * inter + c] = dgu[r * 2 * inter + inter + c].f();
    }
  std::vector<double> dd = ToDouble(dout);
  ref::SwiGluForward<double>(want.data(), gd.data(), ud.data(), rows * inter);
  ref::SwiGluBackward<double>(wdg.data(), wdu.data(), dd.data(), gd.data(), ud.data(),
                              rows * inter);
  EXPECT_TRUE(AllClose(ToDouble(out), want, 1e-6, kBf16Rtol, "out"));
  EXPECT_TRUE(AllClose(got_dg, wdg, 1e-6, kBf16Rtol, "dgate"));
  EXPECT_TRUE(AllClose(got_du, wdu, 1e-6, kBf16Rtol, "dup"));
}

TEST(SwiGluRefTest, BackwardMatchesFiniteDifferencesInFloat64) {
  const int64_t n = 12;
  std::vector<double> g = ToDouble(testing::RandomFloats(n, 3, -5, 5));
  std::vector<double> u = ToDouble(testing::RandomFloats(n, 4));
  std::vector<double> probe = ToDouble(testing::RandomFloats(n, 5));
  auto loss = [&](const std::vector<double>& gg, const std::vector<double>& uu) {
    std::vector<double> y(n);
    ref::SwiGluForward<double>(y.data(), gg.data(), uu.data(), n);
    return testing::Dot(y, probe);
  };
  std::vector<double> dg(n), du(n);
  ref::SwiGluBackward<double>(dg.data(), du.data(), probe.data(), g.data(), u.data(), n);
  // Central differences, h = 1e-6, float64: truncation ~1e-12, round-off ~1e-10.
  EXPECT_TRUE(AllClose(dg, testing::NumericalGradient([&](const auto& v) { return loss(v, u); }, g),
                       1e-7, 1e-6, "dgate"));
  EXPECT_TRUE(AllClose(du, testing::NumericalGradient([&](const auto& v) { return loss(g, v); }, u),
                       1e-7, 1e-6, "dup"));
}

TEST(SwiGluCpuTest, RejectsMismatchedShapes) {
  std::vector<bf16> a(6), b(8), c(6);
  EXPECT_EQ(SwiGluForward(TensorView(c.data(), DType::kBF16, {2, 3}),
                          TensorView(a.data(), DType::kBF16, {2, 3}),
                          TensorView(b.data(), DType::kBF16, {2, 4}), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels
