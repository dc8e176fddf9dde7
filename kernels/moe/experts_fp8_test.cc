// The FP8 expert path's CPU version (experts_fp8.h) against the float64 definition over the
// dequantized e4m3 weights and activations, on odd shapes (K not a multiple of 128, an expert
// without rows, one expert with every row, every expert with the same rows as top-k = E
// gives); the slot layout of the quantizer; the bf16 path within FP8's error.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/moe/experts_fp8.h"
#include "kernels/moe/experts_fp8_testing.h"

namespace tandem::kernels {
namespace {

struct Case {
  const char* name;
  std::vector<int32_t> offsets;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"an empty expert and a 20-row one", {0, 3, 3, 23, 24, 41}},
      {"one expert with every row", {0, 0, 0, 37, 37, 37}},
      {"top-k = E: every expert the same rows", {0, 9, 18, 27, 36, 45}},
  };
  return cases;
}

TEST(MoeFp8ExpertsTest, CpuMatchesFloat64DefinitionOnOddShapes) {
  for (const Case& c : Cases()) {
    testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 200, 72, c.offsets, 31);
    const testing::MoeFp8Result r = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p);
    const std::vector<double> want = testing::MoeFp8ExpertsRef(p, r);
    // Left: bf16 roundings of gate_up and act that a float64 sum can move by one unit (and
    // with it an e4m3 code of act), and y's own bf16 rounding.
    EXPECT_TRUE(testing::AllClose(testing::ToDouble(r.y), want, 2e-2, 2e-2, c.name)) << c.name;
  }
}

TEST(MoeFp8ExpertsTest, WithinFp8ErrorOfTheBf16Path) {
  const Case& c = Cases()[0];
  testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 200, 72, c.offsets, 32);
  const testing::MoeFp8Result r = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p);
  const int64_t n = p.offsets.back();
  std::vector<bf16> gu(n * 2 * p.i), act(n * p.i), y(n * p.h);
  const MoeExpertWeights w{TensorView(p.gate_up.data(), DType::kBF16, {p.e, 2 * p.i, p.h}),
                           TensorView(p.down.data(), DType::kBF16, {p.e, p.h, p.i})};
  ASSERT_TRUE(MoeExpertsForward(nullptr, w, p.offsets,
                                TensorView(p.x.data(), DType::kBF16, {n, p.h}),
                                TensorView(gu.data(), DType::kBF16, {n, 2 * p.i}),
                                TensorView(act.data(), DType::kBF16, {n, p.i}),
                                TensorView(y.data(), DType::kBF16, {n, p.h}), nullptr)
                  .ok());
  double err = 0, norm = 0;
  for (int64_t k = 0; k < n * p.h; ++k) {
    err += std::pow(double(r.y[k].f()) - y[k].f(), 2);
    norm += std::pow(double(y[k].f()), 2);
  }
  // e4m3 keeps 3 mantissa bits: ~2-4% relative error per GEMM, not more than 10% overall.
  EXPECT_LT(std::sqrt(err / norm), 0.1);
  EXPECT_GT(std::sqrt(err / norm), 1e-4);  // it did run in FP8
}

TEST(MoeFp8ExpertsTest, QuantizerFillsSlots) {
  const int64_t e = 3, k = 136, n = 21;
  const std::vector<int32_t> offsets = {0, 20, 20, 21};  // slots 32, 0, 16
  std::vector<bf16> x = testing::RandomBf16(n * k, 5);
  std::vector<int32_t> off = offsets, slots(e + 1, -1);
  std::vector<uint8_t> codes(48 * k, 0xAA);
  std::vector<float> scale(48 * 2, -1.f);
  ASSERT_TRUE(MoeQuantizeFp8Slots(TensorView(x.data(), DType::kBF16, {n, k}), false,
                                  TensorView(off.data(), DType::kI32, {e + 1}), offsets,
                                  TensorView(slots.data(), DType::kI32, {e + 1}),
                                  TensorView(codes.data(), DType::kF8E4M3, {48, k}),
                                  TensorView(scale.data(), DType::kF32, {48 * 2}), nullptr)
                  .ok());
  EXPECT_EQ(slots, (std::vector<int32_t>{0, 32, 32, 48}));
  // Expert 0's row 5, group 1 (8 columns): scale at kb * 32 + 5; the codes dequantize to x.
  const float s = scale[1 * 32 + 5];
  for (int64_t c = 128; c < k; ++c)
    EXPECT_NEAR(E4m3ToFloat(codes[5 * k + c]) * s, x[5 * k + c].f(),
                0.07 * std::fabs(x[5 * k + c].f()) + 1e-6);
  // Padding rows of expert 0 (20..31) are zero with scale 1; expert 2's row 0 is x row 20
  // with scales from 32 * 2.
  EXPECT_EQ(codes[25 * k + 3], 0);
  EXPECT_EQ(scale[0 * 32 + 25], 1.f);
  const float s2 = scale[32 * 2 + 0 * 16 + 0];
  EXPECT_NEAR(E4m3ToFloat(codes[32 * k + 0]) * s2, x[20 * k].f(),
              0.07 * std::fabs(x[20 * k].f()) + 1e-6);
  EXPECT_EQ(scale[32 * 2 + 1 * 16 + 1], 1.f);  // expert 2's padding row 1, group 1
  // Too small a code buffer is refused.
  EXPECT_FALSE(MoeQuantizeFp8Slots(TensorView(x.data(), DType::kBF16, {n, k}), false,
                                   TensorView(off.data(), DType::kI32, {e + 1}), offsets,
                                   TensorView(slots.data(), DType::kI32, {e + 1}),
                                   TensorView(codes.data(), DType::kF8E4M3, {40, k}),
                                   TensorView(scale.data(), DType::kF32, {48 * 2}), nullptr)
                   .ok());
}

}  // namespace
}  // namespace tandem::kernels
