// CPU test of the fused SwiGLU recompute + backward: bitwise the unfused SwiGluForward and
// SwiGluBackward on SplitGateUp views, and argument errors.
#include "kernels/mlp/swiglu_fused.h"

#include <gtest/gtest.h>

#include "kernels/mlp/swiglu.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

TEST(SwiGluFusedCpuTest, BitwiseTheUnfusedForwardAndBackward) {
  const int64_t rows = 5, inter = 11;
  std::vector<bf16> gu = testing::RandomBf16(rows * 2 * inter, 1, -6, 6);
  std::vector<bf16> dout = testing::RandomBf16(rows * inter, 2);
  std::vector<bf16> act(rows * inter), want_act(rows * inter);
  std::vector<bf16> dgu(rows * 2 * inter), want_dgu(rows * 2 * inter);
  const auto [g, u] = SplitGateUp(TensorView(gu.data(), DType::kBF16, {rows, 2 * inter}));
  const auto [dg, du] = SplitGateUp(TensorView(dgu.data(), DType::kBF16, {rows, 2 * inter}));
  const auto [wdg, wdu] =
      SplitGateUp(TensorView(want_dgu.data(), DType::kBF16, {rows, 2 * inter}));
  const TensorView d(dout.data(), DType::kBF16, {rows, inter});
  ASSERT_TRUE(SwiGluRecomputeBackward(TensorView(act.data(), DType::kBF16, {rows, inter}), dg,
                                      du, d, g, u, nullptr)
                  .ok());
  ASSERT_TRUE(
      SwiGluForward(TensorView(want_act.data(), DType::kBF16, {rows, inter}), g, u, nullptr)
          .ok());
  ASSERT_TRUE(SwiGluBackward(wdg, wdu, d, g, u, nullptr).ok());
  EXPECT_TRUE(testing::BitEqual(act, want_act));
  EXPECT_TRUE(testing::BitEqual(dgu, want_dgu));
}

TEST(SwiGluFusedCpuTest, RejectsMismatchedShapes) {
  std::vector<bf16> a(6), b(8);
  const TensorView v(a.data(), DType::kBF16, {2, 3}), bad(b.data(), DType::kBF16, {2, 4});
  EXPECT_EQ(SwiGluRecomputeBackward(v, v, v, v, v, bad, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels
