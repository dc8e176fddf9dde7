// CPU tests of the fused RMSNorm ops against the unfused kernels they replace: norm + RoPE
// forward and backward, residual add + norm (bitwise), norm backward + residual add (bf16
// and f32 dy), and argument errors.
#include "kernels/norm/fused_norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::ToDouble;

// The fused op skips one intermediate bf16 rounding (2^-9 relative to the intermediate) that
// the unfused pair makes. Through a rotation or the norm backward's difference that error can
// land on an output near zero, so it is bounded absolutely by 2^-8 of the largest output
// (about twice the dropped rounding of the largest intermediate) plus one output rounding.
constexpr double kUlpRtol = 1.0 / 128;
double Scale(const std::vector<bf16>& v) {
  double m = 0;
  for (bf16 x : v) m = std::max(m, std::abs(static_cast<double>(x.f())));
  return m / 256;
}

std::vector<int32_t> Positions(int64_t t) {
  std::vector<int32_t> p(t);
  for (int64_t i = 0; i < t; ++i) p[i] = static_cast<int32_t>((i * 977) % 4099);
  return p;
}

struct HeadCase {
  int64_t tokens, heads, d;
};

class NormRopeCpuTest : public ::testing::TestWithParam<HeadCase> {};

TEST_P(NormRopeCpuTest, ForwardAndBackwardMatchUnfused) {
  const auto [t, heads, d] = GetParam();
  const int64_t n = t * heads * d, rows = t * heads;
  const double theta = 1e6;
  const float eps = 1e-6f;
  std::vector<bf16> x = RandomBf16(n, 1, -2, 2), w = RandomBf16(d, 2, 0.5f, 1.5f);
  std::vector<bf16> dy = RandomBf16(n, 3), y(n), want_y(n), dx(n), want_dx(n), tmp(n);
  std::vector<int32_t> pos = Positions(t);
  std::vector<float> rstd(rows), want_rstd(rows), dw(d, 0.5f), want_dw(d, 0.5f);
  const Shape s{t, heads, d};
  auto bv = [&](std::vector<bf16>& v) { return TensorView(v.data(), DType::kBF16, s); };
  const TensorView vw(w.data(), DType::kBF16, {d}), vp(pos.data(), DType::kI32, {t});
  const TensorView vr(rstd.data(), DType::kF32, {rows}),
      vwr(want_rstd.data(), DType::kF32, {rows});
  ASSERT_TRUE(RmsNormRopeForward(bv(y), vr, bv(x), vw, vp, eps, theta, nullptr).ok());
  ASSERT_TRUE(RmsNormForward(bv(want_y), vwr, bv(x), vw, eps, nullptr).ok());
  ASSERT_TRUE(RopeForward(bv(want_y), bv(want_y), vp, RopeConfig{0, theta}, nullptr).ok());
  EXPECT_TRUE(AllClose(ToDouble(y), ToDouble(want_y), Scale(want_y), kUlpRtol, "y"));
  EXPECT_EQ(rstd, want_rstd);

  ASSERT_TRUE(RopeRmsNormBackward(bv(dx), TensorView(dw.data(), DType::kF32, {d}), bv(dy),
                                  bv(x), vw, vr, vp, theta, TensorView(), nullptr)
                  .ok());
  ASSERT_TRUE(RopeBackward(bv(tmp), bv(dy), vp, RopeConfig{0, theta}, nullptr).ok());
  ASSERT_TRUE(RmsNormBackward(bv(want_dx), TensorView(want_dw.data(), DType::kF32, {d}),
                              bv(tmp), bv(x), vw, vr, TensorView(), nullptr)
                  .ok());
  EXPECT_TRUE(AllClose(ToDouble(dx), ToDouble(want_dx), Scale(want_dx), kUlpRtol, "dx"));
  // dw sums rows of products whose rotated factor differs by <= 2^-9 relative: the sums
  // agree to that relative error of the sum of magnitudes, bounded here by 1e-2 absolute.
  EXPECT_TRUE(AllClose(std::span<const float>(dw), want_dw, 1e-2 * std::sqrt(rows), 1e-2, "dw"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeCpuTest,
                         ::testing::Values(HeadCase{1, 1, 2}, HeadCase{7, 3, 16},
                                           HeadCase{5, 2, 6}, HeadCase{9, 4, 128}));

struct RowCase {
  int64_t rows, h;
};

class FusedHiddenNormCpuTest : public ::testing::TestWithParam<RowCase> {};

TEST_P(FusedHiddenNormCpuTest, AddNormIsBitwiseTheUnfusedPair) {
  const auto [rows, h] = GetParam();
  std::vector<bf16> a = RandomBf16(rows * h, 4, -2, 2), b = RandomBf16(rows * h, 5, -2, 2);
  std::vector<bf16> w = RandomBf16(h, 6, 0.5f, 1.5f), hs(rows * h), y(rows * h),
                    want_h(rows * h), want_y(rows * h);
  std::vector<float> r(rows), want_r(rows);
  auto bv = [&](std::vector<bf16>& v) { return TensorView(v.data(), DType::kBF16, {rows, h}); };
  const TensorView vw(w.data(), DType::kBF16, {h});
  ASSERT_TRUE(AddRmsNormForward(bv(hs), bv(y), TensorView(r.data(), DType::kF32, {rows}), bv(a),
                                bv(b), vw, 1e-6f, nullptr)
                  .ok());
  ASSERT_TRUE(ResidualAdd(bv(want_h), bv(a), bv(b), nullptr).ok());
  ASSERT_TRUE(RmsNormForward(bv(want_y), TensorView(want_r.data(), DType::kF32, {rows}),
                             bv(want_h), vw, 1e-6f, nullptr)
                  .ok());
  EXPECT_TRUE(testing::BitEqual(hs, want_h));
  EXPECT_TRUE(testing::BitEqual(y, want_y));
  EXPECT_EQ(r, want_r);
  // Without b (and h): the norm of a alone, here of the sum computed above.
  std::vector<bf16> y2(rows * h);
  std::vector<float> r2(rows);
  ASSERT_TRUE(AddRmsNormForward(TensorView(), bv(y2), TensorView(r2.data(), DType::kF32, {rows}),
                                bv(want_h), TensorView(), vw, 1e-6f, nullptr)
                  .ok());
  EXPECT_TRUE(testing::BitEqual(y2, want_y));
  EXPECT_EQ(r2, want_r);
  // In place (h aliases a) gives the same bits.
  ASSERT_TRUE(AddRmsNormForward(bv(a), bv(y), TensorView(r.data(), DType::kF32, {rows}), bv(a),
                                bv(b), vw, 1e-6f, nullptr)
                  .ok());
  EXPECT_TRUE(testing::BitEqual(a, want_h));
}

TEST_P(FusedHiddenNormCpuTest, BackwardAddMatchesUnfusedForBf16AndF32Dy) {
  const auto [rows, h] = GetParam();
  std::vector<bf16> x = RandomBf16(rows * h, 7, -2, 2), w = RandomBf16(h, 8, 0.5f, 1.5f);
  std::vector<bf16> res0 = RandomBf16(rows * h, 9), y(rows * h);
  std::vector<float> dy32 = testing::RandomFloats(rows * h, 10), rstd(rows);
  auto bv = [&](std::vector<bf16>& v) { return TensorView(v.data(), DType::kBF16, {rows, h}); };
  const TensorView vw(w.data(), DType::kBF16, {h}), vr(rstd.data(), DType::kF32, {rows});
  ASSERT_TRUE(RmsNormForward(bv(y), vr, bv(x), vw, 1e-6f, nullptr).ok());
  for (bool f32 : {false, true}) {
    SCOPED_TRACE(f32 ? "f32 dy" : "bf16 dy");
    std::vector<bf16> dy16(rows * h), dx(rows * h), res = res0, want = res0;
    const TensorView vdy32(dy32.data(), DType::kF32, {rows, h});
    ASSERT_TRUE(Cast(bv(dy16), vdy32, nullptr).ok());
    std::vector<float> dw(h, 0.5f), want_dw(h, 0.5f);
    ASSERT_TRUE(RmsNormBackwardAdd(bv(res), TensorView(dw.data(), DType::kF32, {h}),
                                   f32 ? vdy32 : bv(dy16), bv(x), vw, vr, TensorView(), nullptr)
                    .ok());
    ASSERT_TRUE(RmsNormBackward(bv(dx), TensorView(want_dw.data(), DType::kF32, {h}), bv(dy16),
                                bv(x), vw, vr, TensorView(), nullptr)
                    .ok());
    ASSERT_TRUE(ResidualAdd(bv(want), bv(want), bv(dx), nullptr).ok());
    if (f32) {
      EXPECT_TRUE(AllClose(ToDouble(res), ToDouble(want), Scale(want), kUlpRtol, "dres"));
      EXPECT_TRUE(AllClose(std::span<const float>(dw), want_dw, 1e-2 * std::sqrt(rows), 1e-2,
                           "dw"));
    } else {
      // Same dy: only the rounding of dx before the add is skipped.
      EXPECT_TRUE(AllClose(ToDouble(res), ToDouble(want), Scale(want), kUlpRtol, "dres"));
      EXPECT_EQ(dw, want_dw);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedHiddenNormCpuTest,
                         ::testing::Values(RowCase{1, 1}, RowCase{3, 100}, RowCase{17, 64},
                                           RowCase{4, 4096}));

TEST(FusedNormCpuTest, RejectsBadArguments) {
  std::vector<bf16> x(2 * 3 * 4), w(4);
  std::vector<int32_t> pos(2);
  std::vector<float> rstd(6), dw(4);
  const TensorView vx(x.data(), DType::kBF16, {2, 3, 4}), vw(w.data(), DType::kBF16, {4});
  const TensorView vr(rstd.data(), DType::kF32, {6}), vdw(dw.data(), DType::kF32, {4});
  // pos of the wrong length, odd head_dim, f32 x, i32 dy.
  EXPECT_EQ(RmsNormRopeForward(vx, vr, vx, vw, TensorView(pos.data(), DType::kI32, {1}), 1e-6f,
                               1e6, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  const TensorView odd(x.data(), DType::kBF16, {2, 4, 3});
  EXPECT_EQ(RmsNormRopeForward(odd, TensorView(), odd, TensorView(w.data(), DType::kBF16, {3}),
                               TensorView(pos.data(), DType::kI32, {2}), 1e-6f, 1e6, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  std::vector<float> xf(24);
  const TensorView vxf(xf.data(), DType::kF32, {6, 4});
  EXPECT_EQ(AddRmsNormForward(vxf, vxf, vr, vxf, vxf, vw, 1e-6f, nullptr).code(),
            StatusCode::kInvalidArgument);
  const TensorView x64(x.data(), DType::kBF16, {6, 4});
  EXPECT_EQ(AddRmsNormForward(x64, x64, vr, x64, TensorView(), vw, 1e-6f, nullptr).code(),
            StatusCode::kInvalidArgument);  // h without b
  const TensorView x2(x.data(), DType::kBF16, {6, 4});
  EXPECT_EQ(RmsNormBackwardAdd(x2, vdw, TensorView(pos.data(), DType::kI32, {6, 4}), x2, vw, vr,
                               TensorView(), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels
