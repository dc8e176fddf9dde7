// CPU tests of residual add, casts, scale, embedding gather and concat+noise.
#include "kernels/elementwise/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/elementwise/concat_noise.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/random/philox.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;

TEST(ElementwiseCpuTest, ResidualAddRoundsTheFp32SumOnce) {
  for (int64_t n : {1, 7, 1000}) {
    std::vector<bf16> a = RandomBf16(n, 1, -8, 8), b = RandomBf16(n, 2), out(n);
    ASSERT_TRUE(ResidualAdd(TensorView(out.data(), DType::kBF16, {n}),
                            TensorView(a.data(), DType::kBF16, {n}),
                            TensorView(b.data(), DType::kBF16, {n}), nullptr)
                    .ok());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i].bits, bf16(a[i].f() + b[i].f()).bits) << i;
  }
  std::vector<float> x = {1.5f, -2.f}, y = {0.25f, 4.f};
  TensorView vx(x.data(), DType::kF32, {2}), vy(y.data(), DType::kF32, {2});
  ASSERT_TRUE(ResidualAdd(vx, vx, vy, nullptr).ok());  // in place
  EXPECT_EQ(x[0], 1.75f);
  EXPECT_EQ(x[1], 2.f);
  std::vector<bf16> z(2);
  EXPECT_EQ(ResidualAdd(vx, vx, TensorView(z.data(), DType::kBF16, {2}), nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(ElementwiseCpuTest, CastsRoundToNearestEvenAndRoundTrip) {
  std::vector<float> f = {1.f,   1.00390625f /* tie: 1 + 2^-8 -> 1 */,   1.01171875f /* -> up */,
                          -0.f,  std::numeric_limits<float>::infinity(), 3.4e38f,
                          1e-40f};
  std::vector<bf16> b(f.size());
  std::vector<float> back(f.size());
  const int64_t n = static_cast<int64_t>(f.size());
  ASSERT_TRUE(
      Cast(TensorView(b.data(), DType::kBF16, {n}), TensorView(f.data(), DType::kF32, {n}), nullptr)
          .ok());
  ASSERT_TRUE(Cast(TensorView(back.data(), DType::kF32, {n}),
                   TensorView(b.data(), DType::kBF16, {n}), nullptr)
                  .ok());
  EXPECT_EQ(back[0], 1.f);
  EXPECT_EQ(back[1], 1.f);
  EXPECT_EQ(back[2], 1.015625f);
  EXPECT_TRUE(std::signbit(back[3]));
  EXPECT_TRUE(std::isinf(back[4]));
  EXPECT_TRUE(std::isinf(back[5]));  // past the midpoint above bf16 max 3.3895e38
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(b[i].bits, bf16(f[i]).bits) << i;
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  ASSERT_TRUE(Cast(TensorView(b.data(), DType::kBF16, {1}),
                   TensorView(nan.data(), DType::kF32, {1}), nullptr)
                  .ok());
  EXPECT_TRUE(std::isnan(b[0].f()));
}

TEST(ElementwiseCpuTest, ScaleRoundsTheFp32ProductOnceInAnyShape) {
  for (Shape shape : {Shape{1}, Shape{7}, Shape{3, 5}, Shape{2, 3, 11}}) {
    const int64_t n = shape.numel();
    for (float scale : {1.5f, -0.3f, 0.f}) {
      std::vector<bf16> a = RandomBf16(n, 6, -8, 8), out(n);
      ASSERT_TRUE(Scale(TensorView(out.data(), DType::kBF16, shape),
                        TensorView(a.data(), DType::kBF16, shape), scale, nullptr)
                      .ok());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i].bits, bf16(a[i].f() * scale).bits) << i << " scale " << scale;
      // In place, f32: the exact product.
      std::vector<float> f = testing::RandomFloats(n, 7, -4, 4), want = f;
      for (float& v : want) v *= scale;
      TensorView vf(f.data(), DType::kF32, shape);
      ASSERT_TRUE(Scale(vf, vf, scale, nullptr).ok());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(f[i], want[i]) << i;
    }
  }
  // 1.5 * (1 + 2^-7) = 1.5 + 3 * 2^-8 needs 9 bits: rounds to nearest even once.
  std::vector<bf16> x = {bf16(1.0078125f)};
  TensorView vx(x.data(), DType::kBF16, {1});
  ASSERT_TRUE(Scale(vx, vx, 1.5f, nullptr).ok());
  EXPECT_EQ(x[0].f(), 1.515625f);
}

TEST(ElementwiseCpuTest, ScaleRejectsBadArguments) {
  std::vector<bf16> a(6), out(6);
  std::vector<float> f(6);
  TensorView va(a.data(), DType::kBF16, {2, 3});
  EXPECT_EQ(Scale(TensorView(f.data(), DType::kF32, {2, 3}), va, 2.f, nullptr).code(),
            StatusCode::kInvalidArgument);  // dtypes differ
  EXPECT_EQ(Scale(TensorView(out.data(), DType::kBF16, {3, 2}), va, 2.f, nullptr).code(),
            StatusCode::kInvalidArgument);  // shapes differ
  EXPECT_EQ(Scale(va, va, std::numeric_limits<float>::infinity(), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Scale(va, va, std::numeric_limits<float>::quiet_NaN(), nullptr).code(),
            StatusCode::kInvalidArgument);
  std::vector<int32_t> ids(6);
  TensorView vi(ids.data(), DType::kI32, {6});
  EXPECT_EQ(Scale(vi, vi, 2.f, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(EmbeddingCpuTest, GathersRowsAndZeroesInvalidIds) {
  const int64_t v = 5, h = 3;
  std::vector<bf16> w = RandomBf16(v * h, 3), out(4 * h);
  std::vector<int32_t> ids = {4, 0, -1, 5};
  ASSERT_TRUE(EmbeddingForward(TensorView(out.data(), DType::kBF16, {4, h}),
                               TensorView(ids.data(), DType::kI32, {4}),
                               TensorView(w.data(), DType::kBF16, {v, h}), nullptr)
                  .ok());
  for (int64_t c = 0; c < h; ++c) {
    EXPECT_EQ(out[c].bits, w[4 * h + c].bits);
    EXPECT_EQ(out[h + c].bits, w[c].bits);
    EXPECT_EQ(out[2 * h + c].bits, 0);
    EXPECT_EQ(out[3 * h + c].bits, 0);
  }
}

TEST(ConcatNoiseCpuTest, ZeroNoiseIsAPlainConcat) {
  const int64_t t = 3, h = 5;
  std::vector<bf16> a = RandomBf16(t * h, 4), b = RandomBf16(t * h, 5), out(t * 2 * h);
  TensorView ins[] = {TensorView(a.data(), DType::kBF16, {t, h}),
                      TensorView(b.data(), DType::kBF16, {t, h})};
  ASSERT_TRUE(
      ConcatNoiseForward(TensorView(out.data(), DType::kBF16, {t, 2 * h}), ins, 0.f, 1, 0, nullptr)
          .ok());
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < h; ++c) {
      EXPECT_EQ(out[r * 2 * h + c].bits, a[r * h + c].bits);
      EXPECT_EQ(out[r * 2 * h + h + c].bits, b[r * h + c].bits);
    }
}

TEST(ConcatNoiseCpuTest, NoiseIsUniformBoundedAndFollowsTheStream) {
  const int64_t t = 64, h = 256, k = 3;
  const float std_ = 0.05f;
  std::vector<bf16> zeros(t * h, bf16(0.f)), out(t * k * h), out2(t * k * h);
  std::vector<TensorView> ins(k, TensorView(zeros.data(), DType::kBF16, {t, h}));
  TensorView vo(out.data(), DType::kBF16, {t, k * h});
  ASSERT_TRUE(ConcatNoiseForward(vo, ins, std_, 42, 7, nullptr).ok());
  double mean = 0, var = 0;
  for (int64_t e = 0; e < t * k * h; ++e) {
    // Inputs are 0, so out is bf16(noise_std * U_e) exactly as documented.
    const float want = RoundBf16(std_ * PhiloxToUniformSym(PhiloxBlock(42, 7, e >> 2).v[e & 3]));
    ASSERT_EQ(out[e].f(), want) << e;
    ASSERT_LE(std::fabs(out[e].f()), RoundBf16(std_));  // rounding is monotone
    mean += out[e].f();
    var += out[e].f() * out[e].f();
  }
  const double n = static_cast<double>(t * k * h);
  // U(-s, s): mean 0, variance s^2/3; with 49152 samples the mean's standard error is
  // s / sqrt(3n) = 1.3e-4, so 1e-3 is ~8 sigma; the variance within 5% is as safe.
  EXPECT_NEAR(mean / n, 0.0, 1e-3);
  EXPECT_NEAR(var / n, std_ * std_ / 3, 0.05 * std_ * std_ / 3);
  ASSERT_TRUE(ConcatNoiseForward(TensorView(out2.data(), DType::kBF16, {t, k * h}), ins, std_, 42,
                                 8, nullptr)
                  .ok());
  int same = 0;
  for (int64_t e = 0; e < t * k * h; ++e) same += out[e].bits == out2[e].bits;
  EXPECT_LT(same, t * k * h / 20) << "a new offset must give new noise";
}

TEST(ConcatNoiseCpuTest, RejectsBadArguments) {
  std::vector<bf16> a(6), out(12);
  TensorView in[] = {TensorView(a.data(), DType::kBF16, {2, 3})};
  EXPECT_EQ(ConcatNoiseForward(TensorView(out.data(), DType::kBF16, {2, 6}), in, 0.f, 0, 0, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ConcatNoiseForward(TensorView(out.data(), DType::kBF16, {2, 3}), in, -1.f, 0, 0, nullptr)
          .code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels
