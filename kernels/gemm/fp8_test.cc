// FP8 e4m3 format and the block-scaled quantize / dequantize / GEMM CPU references:
// encoding against an exhaustive decode table, round-trip error bounds, saturation, zeros,
// constant blocks, scale layouts, and the reference GEMM against a float64 product of the
// dequantized operands on odd shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/gemm/fp8.h"

namespace tandem::kernels {
namespace {

std::vector<float> Randn(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(g) * scale;
  return v;
}

struct HostWeight {
  std::vector<uint8_t> q;
  std::vector<float> s;
  Fp8BlockWeight View(int64_t n, int64_t k) {
    q.assign(static_cast<size_t>(n * k), 0xFF);
    s.assign(static_cast<size_t>(Fp8Blocks(n) * Fp8WeightScaleLd(k)), -1.f);
    return {TensorView(q.data(), DType::kF8E4M3, {n, k}),
            TensorView(s.data(), DType::kF32, {Fp8Blocks(n), Fp8WeightScaleLd(k)})};
  }
};

struct HostAct {
  std::vector<uint8_t> q;
  std::vector<float> s;
  // Room for m logical rows (padded to 4).
  Fp8GroupActivation View(int64_t m, int64_t k) {
    const int64_t mp = Fp8PaddedRows(m);
    q.assign(static_cast<size_t>(mp * k), 0xFF);
    s.assign(static_cast<size_t>(Fp8ActScaleElems(mp, k)), -1.f);
    return {TensorView(q.data(), DType::kF8E4M3, {mp, k}),
            TensorView(s.data(), DType::kF32, {Fp8ActScaleElems(mp, k)})};
  }
};

TEST(Fp8Format, EncodeIsNearestOfAllFiniteCodes) {
  std::vector<float> codes;
  for (int b = 0; b < 256; ++b) {
    float f = E4m3ToFloat(static_cast<uint8_t>(b));
    if (std::isfinite(f)) codes.push_back(f);
  }
  EXPECT_EQ(E4m3ToFloat(0x7E), 448.f);
  EXPECT_EQ(E4m3ToFloat(0x01), std::ldexp(1.f, -9));
  EXPECT_TRUE(std::isnan(E4m3ToFloat(0x7F)));
  for (float v : Randn(20000, 1, 40.f)) {
    float got = E4m3ToFloat(FloatToE4m3(v));
    float best = INFINITY;
    for (float c : codes) best = std::min(best, std::fabs(c - v));
    if (std::fabs(v) <= 448.f) {
      EXPECT_EQ(std::fabs(got - v), best) << v;
    }
  }
  // Every finite code round-trips exactly.
  for (int b = 0; b < 256; ++b) {
    float f = E4m3ToFloat(static_cast<uint8_t>(b));
    if (std::isfinite(f) && f != 0.f) {
      EXPECT_EQ(FloatToE4m3(f), b) << b;
    }
  }
  // Ties go to the even mantissa: 1 + 1/16 lies between 1 and 1.125.
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(1.0625f)), 1.f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(1.1875f)), 1.25f);
}

TEST(Fp8Format, SaturatesBeyond448) {
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(449.f)), 448.f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(1e9f)), 448.f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(-INFINITY)), -448.f);
  EXPECT_EQ(FloatToE4m3(0.f), 0x00);
  EXPECT_EQ(FloatToE4m3(-0.f), 0x80);
  EXPECT_EQ(E5m2ToFloat(0x7B), 57344.f);
  EXPECT_TRUE(std::isinf(E5m2ToFloat(0x7C)));
  EXPECT_EQ(E5m2ToFloat(0x3C), 1.f);
}

// |x - deq| <= |x| / 16 (3 mantissa bits, nearest) or, below the normal range of the
// scaled values, half a subnormal step: 2^-10 * scale.
void ExpectRoundTrip(const std::vector<float>& x, const std::vector<float>& deq,
                     const std::vector<float>& scale_of) {
  for (size_t i = 0; i < x.size(); ++i) {
    const float bound = std::max(std::fabs(x[i]) / 16.f, std::ldexp(scale_of[i], -10)) * 1.0001f;
    ASSERT_LE(std::fabs(x[i] - deq[i]), bound) << "element " << i << " x=" << x[i];
  }
}

TEST(Fp8Quantize, WeightRoundTripOnOddShapes) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {130, 257}, {256, 128}, {77, 300}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << n << " K=" << k);
    std::vector<float> w = Randn(n * k, 7, 0.02f);
    for (int64_t i = 0; i < n * k; i += 97) w[i] *= 300.f;  // outliers widen the blocks' ranges
    HostWeight hw;
    Fp8BlockWeight q = hw.View(n, k);
    ASSERT_TRUE(QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {n, k}), q, nullptr).ok());
    std::vector<float> deq(w.size()), scale_of(w.size());
    ASSERT_TRUE(DequantizeFp8Weight(q, TensorView(deq.data(), DType::kF32, {n, k}), nullptr).ok());
    const int64_t ld = Fp8WeightScaleLd(k);
    for (int64_t nb = 0; nb < Fp8Blocks(n); ++nb) {
      for (int64_t kb = 0; kb < ld; ++kb) {
        if (kb >= Fp8Blocks(k)) { EXPECT_EQ(hw.s[nb * ld + kb], 0.f); continue; }
        float amax = 0;
        for (int64_t r = nb * 128; r < std::min(n, nb * 128 + 128); ++r)
          for (int64_t c = kb * 128; c < std::min(k, kb * 128 + 128); ++c)
            amax = std::max(amax, std::fabs(w[r * k + c]));
        EXPECT_EQ(hw.s[nb * ld + kb], amax / 448.f);
      }
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) scale_of[r * k + c] = hw.s[(r / 128) * ld + c / 128];
    ExpectRoundTrip(w, deq, scale_of);
  }
}

// Blocks are square, so the transposed FP8 weight must equal quantizing the transposed
// matrix, codes and scales bit for bit (odd shapes: partial blocks on both sides).
TEST(Fp8Quantize, TransposeEqualsQuantizingTheTranspose) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {130, 257}, {77, 300}, {256, 129}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << n << " K=" << k);
    std::vector<float> w = Randn(n * k, 17, 0.05f), wt(w.size());
    for (int64_t i = 0; i < n * k; i += 89) w[i] *= 500.f;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) wt[c * n + r] = w[r * k + c];
    HostWeight hw, ht, want;
    Fp8BlockWeight q = hw.View(n, k), qt = ht.View(k, n), qw = want.View(k, n);
    ASSERT_TRUE(QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {n, k}), q, nullptr).ok());
    ASSERT_TRUE(QuantizeFp8Weight(TensorView(wt.data(), DType::kF32, {k, n}), qw, nullptr).ok());
    Status st = TransposeFp8Weight(q, qt, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(ht.q, want.q);
    EXPECT_EQ(ht.s, want.s);
  }
  HostWeight a, b;
  Status bad = TransposeFp8Weight(a.View(130, 257), b.View(130, 257), nullptr);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.ToString().find("not the transpose"), std::string::npos) << bad.ToString();
}

TEST(Fp8Quantize, ActivationRoundTripAndScaleLayout) {
  const int64_t m = 13, k = 300;  // M not a multiple of 4: the scale rows are padded to 16
  std::vector<float> x = Randn(m * k, 3);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) x[r * k + c] *= std::ldexp(1.f, static_cast<int>(r % 5) - (c / 128));
  std::vector<bf16> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = bf16(x[i]), x[i] = xb[i].f();
  HostAct ha;
  Fp8GroupActivation q = ha.View(m, k);
  ASSERT_TRUE(QuantizeFp8Activation(TensorView(xb.data(), DType::kBF16, {m, k}), q, nullptr).ok());
  const int64_t ld = Fp8PaddedRows(m);
  ASSERT_EQ(ld, 16);
  std::vector<float> deq(ld * k), scale_of(x.size());
  ASSERT_TRUE(cpu::DequantizeFp8Activation(q, TensorView(deq.data(), DType::kF32, {ld, k}), nullptr).ok());
  for (int64_t i = m * k; i < ld * k; ++i) ASSERT_EQ(deq[i], 0.f) << "pad rows are zero";
  deq.resize(x.size());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t kb = 0; kb < Fp8Blocks(k); ++kb) {
      float amax = 0;
      for (int64_t c = kb * 128; c < std::min(k, kb * 128 + 128); ++c) amax = std::max(amax, std::fabs(x[r * k + c]));
      EXPECT_EQ(ha.s[kb * ld + r], amax / 448.f) << "row " << r << " group " << kb;
      for (int64_t c = kb * 128; c < std::min(k, kb * 128 + 128); ++c) scale_of[r * k + c] = ha.s[kb * ld + r];
    }
  ExpectRoundTrip(x, deq, scale_of);
}

TEST(Fp8Quantize, ZerosAndConstantBlocks) {
  const int64_t n = 256, k = 256;
  std::vector<float> w(n * k, 0.f);
  for (int64_t r = 128; r < 256; ++r)
    for (int64_t c = 0; c < 128; ++c) w[r * k + c] = -3.25f;  // block (1, 0): one value
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t c = 128; c < 256; ++c) w[r * k + c] = 1e6f;  // block (0, 1): huge, one value
  HostWeight hw;
  Fp8BlockWeight q = hw.View(n, k);
  ASSERT_TRUE(QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {n, k}), q, nullptr).ok());
  const int64_t ld = Fp8WeightScaleLd(k);
  EXPECT_EQ(hw.s[0], 1.f);  // an all-zero block keeps scale 1 and codes 0
  EXPECT_EQ(hw.s[1], 1e6f / 448.f);
  EXPECT_EQ(hw.s[ld], 3.25f / 448.f);
  std::vector<float> deq(w.size());
  ASSERT_TRUE(DequantizeFp8Weight(q, TensorView(deq.data(), DType::kF32, {n, k}), nullptr).ok());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t code = hw.q[r * k + c];
      if (w[r * k + c] == 0.f) {
        EXPECT_EQ(code, 0);
        EXPECT_EQ(deq[r * k + c], 0.f);
      } else {
        EXPECT_EQ(code & 0x7F, 0x7E);  // a constant block is all +-448 before scaling
        EXPECT_NEAR(deq[r * k + c], w[r * k + c], std::fabs(w[r * k + c]) * 1e-6f);
      }
    }
}

TEST(Fp8Quantize, RejectsWrongScaleShape) {
  std::vector<uint8_t> q(130 * 256);
  std::vector<float> s(2 * 2), w(130 * 256);
  Fp8BlockWeight bad{TensorView(q.data(), DType::kF8E4M3, {130, 256}),
                     TensorView(s.data(), DType::kF32, {2, 2})};  // ld must be 4
  Status st = QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {130, 256}), bad, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("scale"), std::string::npos) << st.ToString();
}

// The reference GEMM equals a float64 product of the dequantized operands, for odd M, N
// and K (partial blocks in every dimension), with and without the residual accumulate.
TEST(Fp8Gemm, ReferenceMatchesDequantizedProduct) {
  for (auto [m, n, k, beta] : {std::tuple<int64_t, int64_t, int64_t, float>{1, 1, 16, 0.f},
                               {131, 200, 272, 0.f},
                               {5, 384, 640, 1.f}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << " K=" << k);
    std::vector<float> x = Randn(m * k, 11), w = Randn(n * k, 12, 0.05f), c0 = Randn(m * n, 13);
    HostAct ha;
    HostWeight hw;
    Fp8GroupActivation qa = ha.View(m, k);
    Fp8BlockWeight qw = hw.View(n, k);
    ASSERT_TRUE(QuantizeFp8Activation(TensorView(x.data(), DType::kF32, {m, k}), qa, nullptr).ok());
    ASSERT_TRUE(QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {n, k}), qw, nullptr).ok());
    const int64_t mp = Fp8PaddedRows(m);
    std::vector<float> dx(mp * k), dw(w.size()), c = c0;
    c.resize(mp * n, 0.f);
    ASSERT_TRUE(cpu::DequantizeFp8Activation(qa, TensorView(dx.data(), DType::kF32, {mp, k}), nullptr).ok());
    ASSERT_TRUE(DequantizeFp8Weight(qw, TensorView(dw.data(), DType::kF32, {n, k}), nullptr).ok());
    GemmOptions opt;
    opt.trans_b = true;
    opt.beta = beta;
    ASSERT_TRUE(Fp8Gemm(nullptr, qa, qw, TensorView(c.data(), DType::kF32, {mp, n}), opt, nullptr).ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = beta * c0[i * n + j];
        for (int64_t p = 0; p < k; ++p) ref += double(dx[i * k + p]) * dw[j * k + p];
        ASSERT_NEAR(c[i * n + j], ref, 1e-5 * (1 + std::fabs(ref))) << i << "," << j;
      }
    // Quantization error of the whole product stays at FP8's level (not a wrong layout).
    double num = 0, den = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double exact = beta * c0[i * n + j];
        for (int64_t p = 0; p < k; ++p) exact += double(x[i * k + p]) * w[j * k + p];
        num += (c[i * n + j] - exact) * (c[i * n + j] - exact);
        den += exact * exact;
      }
    EXPECT_LT(std::sqrt(num / den), 0.06);
  }
}

TEST(Fp8Gemm, RejectsUnsupportedOptions) {
  HostAct ha;
  HostWeight hw;
  Fp8GroupActivation qa = ha.View(4, 128);
  Fp8BlockWeight qw = hw.View(8, 128);
  std::vector<float> c(32);
  std::vector<bf16> x(3 * 128);
  EXPECT_FALSE(QuantizeFp8Activation(TensorView(x.data(), DType::kBF16, {3, 128}),
                                     ha.View(8, 128), nullptr).ok()) << "3 rows cannot fill 8";
  qa = ha.View(4, 128);
  GemmOptions opt;  // trans_b missing
  EXPECT_FALSE(Fp8Gemm(nullptr, qa, qw, TensorView(c.data(), DType::kF32, {4, 8}), opt, nullptr).ok());
  opt.trans_b = true;
  HostWeight hw2;
  Fp8BlockWeight wrong_k = hw2.View(8, 256);
  EXPECT_FALSE(Fp8Gemm(nullptr, qa, wrong_k, TensorView(c.data(), DType::kF32, {4, 8}), opt, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels
