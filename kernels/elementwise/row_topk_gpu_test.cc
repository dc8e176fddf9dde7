// GPU tests of the row top-k: CUDA against the CPU reference on odd shapes (k from 1 to
// kRowTopKMax, rows shorter than a block, the decode shape 16 x 151936), heavy ties across
// threads, warps and 1024-entry chunks, and NaN / -0 / infinities.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_topk.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

void Check(const std::vector<float>& x, int64_t rows, int64_t v, int64_t k) {
  std::vector<int32_t> want_ids(rows * k);
  std::vector<float> want_vals(rows * k);
  ASSERT_TRUE(cpu::RowTopK(TensorView(want_ids.data(), DType::kI32, {rows, k}),
                           TensorView(want_vals.data(), DType::kF32, {rows, k}),
                           TensorView(const_cast<float*>(x.data()), DType::kF32, {rows, v}),
                           nullptr)
                  .ok());
  Tensor dx = testing::ToDevice(x, DType::kF32, {rows, v});
  Tensor ids = Tensor::Empty(testing::Pool(), DType::kI32, {rows, k}).value();
  Tensor vals = Tensor::Empty(testing::Pool(), DType::kF32, {rows, k}).value();
  ASSERT_TRUE(RowTopK(ids, vals, dx, nullptr).ok());
  EXPECT_EQ(testing::ToHost<int32_t>(ids), want_ids) << rows << "x" << v << " k " << k;
  const std::vector<float> got = testing::ToHost<float>(vals);
  for (size_t i = 0; i < got.size(); ++i)  // bitwise (NaN and -0 included)
    ASSERT_EQ(std::signbit(got[i]), std::signbit(want_vals[i])) << i;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isnan(want_vals[i])) {
      ASSERT_EQ(got[i], want_vals[i]) << i;
    }
  }
}

TEST(RowTopKGpuTest, CudaMatchesCpuOnOddShapes) {
  for (const auto& [rows, v] : {std::pair<int64_t, int64_t>{1, 1},
                                {3, 7},
                                {17, 1031},
                                {2, 1024},
                                {5, 3001},
                                {16, 151936}}) {
    const std::vector<float> x = testing::RandomFloats(rows * v, v);
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{50}, int64_t{1000}, kRowTopKMax, v}) {
      if (k > v || k > kRowTopKMax) continue;
      Check(x, rows, v, k);
    }
  }
}

TEST(RowTopKGpuTest, TiesAcrossChunksAndSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  constexpr int64_t kV = 5000;
  std::vector<float> x(4 * kV);
  for (int64_t j = 0; j < kV; ++j) {
    x[0 * kV + j] = static_cast<float>(j % 7);  // ~714 copies of each level
    x[1 * kV + j] = j % 2 ? 0.f : -0.f;         // all equal: the first k
    x[2 * kV + j] = j % 3 == 0 ? nan : -inf;    // NaN below -inf
    x[3 * kV + j] = j % 1000 == 999 ? inf : static_cast<float>(j % 5) - 2;
  }
  for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{715}, int64_t{1000}, kRowTopKMax})
    Check(x, 4, kV, k);
}

}  // namespace
}  // namespace tandem::kernels
