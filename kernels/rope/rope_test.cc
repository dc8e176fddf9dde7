// CPU tests of RoPE: a hand-computed case in the HF layout, float64 reference, partial
// rotation, and the backward against finite differences in float64.
#include "kernels/rope/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/rope/rope_ref.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::ToDouble;

constexpr double kBf16Rtol = 1.0 / 256;  // one bf16 rounding (2^-9) plus fp32 noise

TEST(RopeCpuTest, MatchesHandComputedTwoHalvesLayout) {
  // head_dim 4, theta 100: inv_freq = [1, 0.1]; position 2 -> angles [2, 0.2].
  // Pairs are (0, 2) and (1, 3) as in HF rotate_half.
  std::vector<bf16> x = testing::ToBf16(std::vector<float>{1, 0, 0, 1}), out(4);
  std::vector<int32_t> pos = {2};
  ASSERT_TRUE(RopeForward(TensorView(out.data(), DType::kBF16, {1, 1, 4}),
                          TensorView(x.data(), DType::kBF16, {1, 1, 4}),
                          TensorView(pos.data(), DType::kI32, {1}), RopeConfig{0, 100.0}, nullptr)
                  .ok());
  const double want[] = {std::cos(2.0), -std::sin(0.2), std::sin(2.0), std::cos(0.2)};
  EXPECT_TRUE(AllClose(ToDouble(out), std::vector<double>(want, want + 4), 1e-6, kBf16Rtol));
}

TEST(RopeCpuTest, MatchesFloat64WithPartialRotation) {
  const int64_t t = 5, heads = 3, hd = 16, rd = 8;
  std::vector<bf16> x = testing::RandomBf16(t * heads * hd, 1, -2, 2), out(x.size());
  std::vector<int32_t> pos = {0, 1, 7, 1000, 40000};
  RopeConfig cfg{rd, 1e6};
  ASSERT_TRUE(RopeForward(TensorView(out.data(), DType::kBF16, {t, heads, hd}),
                          TensorView(x.data(), DType::kBF16, {t, heads, hd}),
                          TensorView(pos.data(), DType::kI32, {t}), cfg, nullptr)
                  .ok());
  std::vector<float> inv(rd / 2);
  RopeInvFreq(rd, cfg.theta, inv.data());
  std::vector<double> invd = ToDouble(inv), xd = ToDouble(x), want(x.size());
  ref::RopeApply<double>(want.data(), xd.data(), pos.data(), invd.data(), t, heads, hd, rd, 1.0);
  // fp32 angles up to 4e4 rad carry ~2e-3 rad absolute error (ulp(4e4) = 0.004): the
  // rotated values may differ from float64 by up to |x| * 2e-3.
  EXPECT_TRUE(AllClose(ToDouble(out), want, 5e-3, kBf16Rtol));
  for (int64_t r = 0; r < t * heads; ++r)
    for (int64_t i = rd; i < hd; ++i) ASSERT_EQ(out[r * hd + i].bits, x[r * hd + i].bits);
  for (int64_t i = 0; i < heads * hd; ++i) ASSERT_EQ(out[i].bits, x[i].bits);  // position 0
}

TEST(RopeCpuTest, BackwardUndoesForwardAndRejectsOddRotaryDim) {
  const int64_t t = 2, heads = 2, hd = 8;
  std::vector<bf16> x = testing::RandomBf16(t * heads * hd, 2), y(x.size()), back(x.size());
  std::vector<int32_t> pos = {3, 11};
  TensorView vp(pos.data(), DType::kI32, {t});
  ASSERT_TRUE(RopeForward(TensorView(y.data(), DType::kBF16, {t, heads, hd}),
                          TensorView(x.data(), DType::kBF16, {t, heads, hd}), vp, {}, nullptr)
                  .ok());
  ASSERT_TRUE(RopeBackward(TensorView(back.data(), DType::kBF16, {t, heads, hd}),
                           TensorView(y.data(), DType::kBF16, {t, heads, hd}), vp, {}, nullptr)
                  .ok());
  // A rotation's transpose is its inverse; two bf16 roundings separate x and back.
  EXPECT_TRUE(AllClose(ToDouble(back), ToDouble(x), 1e-2, 2 * kBf16Rtol));
  Status s = RopeForward(TensorView(y.data(), DType::kBF16, {t, heads, hd}),
                         TensorView(x.data(), DType::kBF16, {t, heads, hd}), vp, {5, 1e6}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(RopeRefTest, BackwardMatchesFiniteDifferencesInFloat64) {
  const int64_t t = 2, heads = 2, hd = 6, rd = 4;
  std::vector<int32_t> pos = {5, 17};
  std::vector<double> inv = {1.0, 0.01};
  std::vector<double> x = ToDouble(testing::RandomFloats(t * heads * hd, 3));
  std::vector<double> probe = ToDouble(testing::RandomFloats(t * heads * hd, 4));
  auto loss = [&](const std::vector<double>& xx) {
    std::vector<double> y(xx.size());
    ref::RopeApply<double>(y.data(), xx.data(), pos.data(), inv.data(), t, heads, hd, rd, 1.0);
    return testing::Dot(y, probe);
  };
  std::vector<double> dx(x.size());
  ref::RopeApply<double>(dx.data(), probe.data(), pos.data(), inv.data(), t, heads, hd, rd, -1.0);
  // The loss is linear in x: central differences are exact up to round-off (~1e-10).
  EXPECT_TRUE(AllClose(dx, testing::NumericalGradient(loss, x), 1e-7, 1e-6, "dx"));
}

}  // namespace
}  // namespace tandem::kernels
