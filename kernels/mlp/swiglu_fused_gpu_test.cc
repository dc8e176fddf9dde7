// GPU test of the fused SwiGLU recompute + backward: bitwise the CUDA SwiGluForward and
// SwiGluBackward (same formulas, same expf, one rounding each) on fused [rows, 2I] views,
// vectorised and scalar shapes.
#include <gtest/gtest.h>

#include <tuple>

#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fused.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

// (rows, I)
class SwiGluFusedGpuTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(SwiGluFusedGpuTest, BitwiseTheUnfusedCudaKernels) {
  const auto [rows, inter] = GetParam();
  Tensor gu = testing::ToDevice(testing::RandomBf16(rows * 2 * inter, 1, -8, 8), DType::kBF16,
                                {rows, 2 * inter});
  Tensor dout =
      testing::ToDevice(testing::RandomBf16(rows * inter, 2), DType::kBF16, {rows, inter});
  auto empty = [&](int64_t cols) {
    return Tensor::Empty(testing::Pool(), DType::kBF16, {rows, cols}).value();
  };
  Tensor act = empty(inter), want_act = empty(inter), dgu = empty(2 * inter),
         want_dgu = empty(2 * inter);
  const auto [g, u] = SplitGateUp(gu);
  const auto [dg, du] = SplitGateUp(dgu);
  const auto [wdg, wdu] = SplitGateUp(want_dgu);
  ASSERT_TRUE(SwiGluRecomputeBackward(act, dg, du, dout, g, u, nullptr).ok());
  ASSERT_TRUE(SwiGluForward(want_act, g, u, nullptr).ok());
  ASSERT_TRUE(SwiGluBackward(wdg, wdu, dout, g, u, nullptr).ok());
  EXPECT_TRUE(testing::BitEqual(testing::ToHost<bf16>(act), testing::ToHost<bf16>(want_act)));
  EXPECT_TRUE(testing::BitEqual(testing::ToHost<bf16>(dgu), testing::ToHost<bf16>(want_dgu)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluFusedGpuTest,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(3, 7),
                                           std::make_tuple(1000, 127),
                                           std::make_tuple(64, 12288)));

}  // namespace
}  // namespace tandem::kernels
