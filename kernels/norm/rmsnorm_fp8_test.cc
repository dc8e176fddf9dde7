// The CPU RMSNorm -> e4m3 against the compositions it stands for, bit for bit: with weight
// offset 0, RmsNormForward then QuantizeFp8Activation (Qwen3); with offset 1,
// ZeroCentredRmsNormForward then QuantizeFp8Activation (Qwen3.5's `1 + w` norm). Odd shapes:
// M not a multiple of 4 (padding rows) and H with a partial 128-column group.
#include "kernels/norm/rmsnorm_fp8.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;

struct Fp8Rows {
  Fp8Rows(int64_t m, int64_t h)
      : mp(Fp8PaddedRows(m)), codes(mp * h, 0xFF), scales(Fp8ActScaleElems(mp, h), -1.f) {
    act = {TensorView(codes.data(), DType::kF8E4M3, {mp, h}),
           TensorView(scales.data(), DType::kF32, {static_cast<int64_t>(scales.size())})};
  }
  int64_t mp;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Fp8GroupActivation act;
};

TEST(RmsNormFp8Cpu, IsTheNormThenTheQuantizerForBothWeightOffsets) {
  for (auto [m, h] : {std::pair<int64_t, int64_t>{1, 128}, {13, 300}, {7, 130}}) {
    for (float offset : {0.f, 1.f}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " H=" << h << " offset=" << offset);
      auto x = RandomBf16(m * h, 41, -3.f, 3.f);
      auto w = offset == 0.f ? RandomBf16(h, 42, 0.5f, 1.5f) : RandomBf16(h, 42, -0.1f, 0.1f);
      const TensorView xv(x.data(), DType::kBF16, {m, h}), wv(w.data(), DType::kBF16, {h});
      Fp8Rows fused(m, h), composed(m, h);
      ASSERT_TRUE(cpu::RmsNormFp8Forward(fused.act, xv, wv, 1e-6f, nullptr, offset).ok());
      std::vector<bf16> y(m * h);
      const TensorView yv(y.data(), DType::kBF16, {m, h});
      const Status norm = offset == 0.f ? RmsNormForward(yv, {}, xv, wv, 1e-6f, nullptr)
                                        : ZeroCentredRmsNormForward(yv, xv, wv, 1e-6f, nullptr);
      ASSERT_TRUE(norm.ok()) << norm.ToString();
      ASSERT_TRUE(QuantizeFp8Activation(yv, composed.act, nullptr).ok());
      EXPECT_EQ(fused.codes, composed.codes);
      EXPECT_EQ(fused.scales, composed.scales);
    }
  }
}

// The offset changes the result (the test above would pass if it were ignored with w ~ 1).
TEST(RmsNormFp8Cpu, TheWeightOffsetIsApplied) {
  const int64_t m = 4, h = 128;
  auto x = RandomBf16(m * h, 43, -3.f, 3.f);
  auto w = RandomBf16(h, 44, -0.1f, 0.1f);
  const TensorView xv(x.data(), DType::kBF16, {m, h}), wv(w.data(), DType::kBF16, {h});
  Fp8Rows plain(m, h), centred(m, h);
  ASSERT_TRUE(cpu::RmsNormFp8Forward(plain.act, xv, wv, 1e-6f, nullptr, 0.f).ok());
  ASSERT_TRUE(cpu::RmsNormFp8Forward(centred.act, xv, wv, 1e-6f, nullptr, 1.f).ok());
  EXPECT_NE(plain.scales, centred.scales);
}

}  // namespace
}  // namespace tandem::kernels
