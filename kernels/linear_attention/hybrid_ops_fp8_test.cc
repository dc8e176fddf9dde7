// The hybrid layers' FP8 producers (hybrid_ops_fp8.h) on the CPU: bit for bit the bf16 op
// followed by QuantizeFp8Activation (what the FP8 forward ran before they were fused), on
// strided inputs, T not a multiple of 4 (padding rows) and a partial last 128-column group;
// and the dequantized output near the bf16 op's.
#include "kernels/linear_attention/hybrid_ops_fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;

// Host codes and scales of an [Fp8PaddedRows(t), k] activation, filled with junk.
struct HostFp8 {
  std::vector<uint8_t> q;
  std::vector<float> s;
  int64_t mp, k;
  HostFp8(int64_t t, int64_t cols)
      : q(static_cast<size_t>(Fp8PaddedRows(t) * cols), 0xEE),
        s(static_cast<size_t>(Fp8ActScaleElems(t, cols)), -7.f),
        mp(Fp8PaddedRows(t)),
        k(cols) {}
  Fp8GroupActivation View() {
    return {TensorView(q.data(), DType::kF8E4M3, {mp, k}),
            TensorView(s.data(), DType::kF32, {static_cast<int64_t>(s.size())})};
  }
  float At(int64_t r, int64_t c) const {
    return E4m3ToFloat(q[r * k + c]) * s[(c / kFp8Block) * mp + r];
  }
};

// Every code and scale equal, and the dequantized rows within e4m3's precision of `y`
// (bf16 [t, k] contiguous): one rounding of 2^-4 relative, or 2^-10 of the group's scale.
void ExpectComposition(const HostFp8& fused, HostFp8& composed, const std::vector<bf16>& y,
                       int64_t t) {
  ASSERT_TRUE(QuantizeFp8Activation(TensorView(const_cast<bf16*>(y.data()), DType::kBF16,
                                               {t, composed.k}),
                                    composed.View(), nullptr)
                  .ok());
  EXPECT_EQ(fused.q, composed.q);
  EXPECT_EQ(fused.s, composed.s);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < fused.k; ++c) {
      const double want = y[r * fused.k + c].f();
      const double tol = std::fabs(want) / 16 + fused.s[(c / kFp8Block) * fused.mp + r] / 1024;
      ASSERT_NEAR(fused.At(r, c), want, tol) << "row " << r << " col " << c;
    }
  for (int64_t r = t; r < fused.mp; ++r)
    for (int64_t c = 0; c < fused.k; ++c) {
      EXPECT_EQ(fused.q[r * fused.k + c], 0);
      EXPECT_EQ(fused.s[(c / kFp8Block) * fused.mp + r], 1.f);
    }
}

TEST(GatedRmsNormFp8Test, IsTheGatedNormThenTheQuantizer) {
  // d 128 (a head is a group) and d 50 (groups straddle heads; 150 columns, a partial group).
  for (const auto& [t, heads, d] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 3, 128}, {5, 3, 50}, {4, 2, 64}}) {
    SCOPED_TRACE(::testing::Message() << "t " << t << " heads " << heads << " d " << d);
    const int64_t cols = heads * d, xs = cols + 3, zs = cols + 7;
    std::vector<bf16> x = RandomBf16(t * xs, 21, -3.f, 3.f), z = RandomBf16(t * zs, 22, -3.f, 3.f);
    std::vector<bf16> w = RandomBf16(d, 23, 0.5f, 1.5f);
    const TensorView xv = TensorView(x.data(), DType::kBF16, {t, xs}).Narrow(1, 2, cols);
    const TensorView zv = TensorView(z.data(), DType::kBF16, {t, zs}).Narrow(1, 7, cols);
    const TensorView wv(w.data(), DType::kBF16, {d});
    HostFp8 fused(t, cols), composed(t, cols);
    ASSERT_TRUE(GatedRmsNormFp8Forward(fused.View(), xv, zv, wv, 1e-6f, nullptr).ok());
    std::vector<bf16> y(t * cols);
    ASSERT_TRUE(GatedRmsNormForward(TensorView(y.data(), DType::kBF16, {t, cols}), xv, zv, wv,
                                    1e-6f, nullptr)
                    .ok());
    ExpectComposition(fused, composed, y, t);
  }
}

TEST(SigmoidGateFp8Test, IsTheGateThenTheQuantizerOverHeadsSideBySide) {
  // x [t*heads, d] with the gate the second half of [t*heads, 2d] rows (the attention's
  // query | gate); out [t, heads*d]. d 256 (two groups per head), d 50 (groups straddle).
  for (const auto& [t, heads, d] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 3, 256}, {7, 3, 50}, {1, 1, 8}}) {
    SCOPED_TRACE(::testing::Message() << "t " << t << " heads " << heads << " d " << d);
    const int64_t rows = t * heads;
    std::vector<bf16> x = RandomBf16(rows * d, 24, -3.f, 3.f),
                      g = RandomBf16(rows * 2 * d, 25, -4.f, 4.f);
    const TensorView xv(x.data(), DType::kBF16, {rows, d});
    const TensorView gv = TensorView(g.data(), DType::kBF16, {rows, 2 * d}).Narrow(1, d, d);
    HostFp8 fused(t, heads * d), composed(t, heads * d);
    ASSERT_TRUE(SigmoidGateFp8Forward(fused.View(), xv, gv, nullptr).ok());
    std::vector<bf16> y = x;  // the bf16 op in place, as the bf16 forward runs it
    const TensorView yv(y.data(), DType::kBF16, {rows, d});
    ASSERT_TRUE(SigmoidGateForward(yv, yv, gv, nullptr).ok());
    ExpectComposition(fused, composed, y, t);
  }
}

TEST(HybridOpsFp8Test, RejectsMismatchedOutputs) {
  std::vector<bf16> x(6 * 8), w(8);
  std::vector<uint8_t> q(8 * 16);
  std::vector<float> s(8);
  const TensorView xv(x.data(), DType::kBF16, {6, 8});
  // 6 rows pad to 8, not 4.
  Fp8GroupActivation small{TensorView(q.data(), DType::kF8E4M3, {4, 8}),
                           TensorView(s.data(), DType::kF32, {8})};
  Status st = GatedRmsNormFp8Forward(small, xv, xv, TensorView(w.data(), DType::kBF16, {8}), 1e-6f,
                                     nullptr);
  EXPECT_NE(st.message().find("out"), std::string::npos) << st.ToString();
  // 32 columns = 4 heads of 8, and 4 does not divide x's 6 rows.
  std::vector<uint8_t> q4(4 * 32);
  Fp8GroupActivation four{TensorView(q4.data(), DType::kF8E4M3, {4, 32}),
                          TensorView(s.data(), DType::kF32, {8})};
  st = SigmoidGateFp8Forward(four, xv, xv, nullptr);
  EXPECT_NE(st.message().find("heads"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
