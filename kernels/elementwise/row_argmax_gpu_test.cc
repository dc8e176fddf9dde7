// GPU tests of the row argmax: CUDA against the CPU reference on odd shapes, the decode shape
// (16 x 151936 f32), bf16, ties spread across threads and warps, and NaN rows.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_argmax.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

template <typename T>
void Check(const std::vector<T>& x, DType dtype, int64_t rows, int64_t v) {
  std::vector<int32_t> want(static_cast<size_t>(rows));
  ASSERT_TRUE(cpu::RowArgmax(TensorView(want.data(), DType::kI32, {rows}),
                             TensorView(const_cast<T*>(x.data()), dtype, {rows, v}), nullptr)
                  .ok());
  Tensor dx = testing::ToDevice(x, dtype, {rows, v});
  Tensor dout = Tensor::Empty(testing::Pool(), DType::kI32, {rows}).value();
  ASSERT_TRUE(RowArgmax(dout, dx, nullptr).ok());
  EXPECT_EQ(testing::ToHost<int32_t>(dout), want) << rows << "x" << v;
}

TEST(RowArgmaxGpuTest, CudaMatchesCpuOnOddShapes) {
  for (const auto& [rows, v] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 1031},
                               {16, 151936}, {5, 248320}}) {
    Check(testing::RandomFloats(rows * v, v), DType::kF32, rows, v);
    Check(testing::RandomBf16(rows * v, v + 1), DType::kBF16, rows, v);
  }
}

TEST(RowArgmaxGpuTest, TiesAcrossWarpsAndNanRows) {
  constexpr int64_t kV = 5000;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(4 * kV, 0.f);
  x[0 * kV + 4999] = 2;  // row 0: ties at 4999 and 37 (different threads and warps): 37
  x[0 * kV + 37] = 2;
  for (int64_t j = 0; j < kV; ++j) x[1 * kV + j] = nan;  // row 1: only NaN: 0
  for (int64_t j = 0; j < kV; ++j) x[2 * kV + j] = j % 3 == 0 ? nan : -1.f;  // row 2: 1
  x[3 * kV + 600] = 1;  // row 3: 600
  Check(x, DType::kF32, 4, kV);
}

}  // namespace
}  // namespace tandem::kernels
