// CPU tests of the row top-k: the k largest by index order, ties at the cut to the smaller
// index, -0 == +0, NaN below every number, k = V, and the argument checks.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_topk.h"

namespace tandem::kernels {
namespace {

struct TopK {
  std::vector<int32_t> ids;
  std::vector<float> vals;
};

TopK TopKOf(std::vector<float>& x, int64_t rows, int64_t v, int64_t k) {
  TopK out{std::vector<int32_t>(rows * k, -7), std::vector<float>(rows * k, -7.f)};
  const Status s = RowTopK(TensorView(out.ids.data(), DType::kI32, {rows, k}),
                           TensorView(out.vals.data(), DType::kF32, {rows, k}),
                           TensorView(x.data(), DType::kF32, {rows, v}), nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(RowTopKTest, LargestByIndexTiesToTheSmallerIndex) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {
      1,   5,    3,   3,    0,  3,   // 5, then two of the three 3s: ids 1, 2, 3
      nan, -1,   nan, -inf, -2, -3,  // NaN last: -1, -2, -3
      0.f, -0.f, 0.f, -1,   -1, -1,  // -0 == +0: the first three
  };
  const TopK t = TopKOf(x, 3, 6, 3);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 2, 3, 1, 4, 5, 0, 1, 2}));
  EXPECT_EQ(t.vals[0], 5.f);
  EXPECT_EQ(t.vals[3], -1.f);
  EXPECT_TRUE(std::signbit(t.vals[7]));  // the value itself, -0 as it was
}

TEST(RowTopKTest, KEqualToVKeepsTheWholeRowAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {2, nan, -1};
  const TopK t = TopKOf(x, 1, 3, 3);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(std::isnan(t.vals[1]));
}

TEST(RowTopKTest, RefusesBadShapes) {
  std::vector<float> x(12, 0.f), vals(8);
  std::vector<int32_t> ids(8);
  const TensorView in(x.data(), DType::kF32, {2, 6});
  EXPECT_FALSE(RowTopK(TensorView(ids.data(), DType::kI32, {2, 0}),
                       TensorView(vals.data(), DType::kF32, {2, 0}), in, nullptr)
                   .ok());
  std::vector<int32_t> big_ids(14);
  std::vector<float> big_vals(14);
  const Status over = RowTopK(TensorView(big_ids.data(), DType::kI32, {2, 7}),
                              TensorView(big_vals.data(), DType::kF32, {2, 7}), in, nullptr);
  EXPECT_NE(over.ToString().find("K = 7"), std::string::npos) << over.ToString();
  EXPECT_FALSE(RowTopK(TensorView(ids.data(), DType::kI32, {2, 4}),
                       TensorView(vals.data(), DType::kF32, {1, 4}), in, nullptr)
                   .ok());
}

}  // namespace
}  // namespace tandem::kernels
