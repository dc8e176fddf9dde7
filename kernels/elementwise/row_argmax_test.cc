// CPU tests of the row argmax: the first maximum on ties, NaN skipped, an all-NaN row, bf16
// and f32 on odd shapes against a direct scan, and the argument checks.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_argmax.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

std::vector<int32_t> Argmax(std::vector<float>& x, int64_t rows, int64_t v) {
  std::vector<int32_t> out(static_cast<size_t>(rows), -7);
  const Status s = RowArgmax(TensorView(out.data(), DType::kI32, {rows}),
                             TensorView(x.data(), DType::kF32, {rows, v}), nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(RowArgmaxTest, FirstMaximumNanSkippedAllNanIsZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {
      1, 3, 3, 2, 0,          // tie: the first 3
      nan, -5, -4, nan, -4,   // NaN skipped, tie on -4
      nan, nan, nan, nan, nan,  // only NaN
      -inf, -inf, -inf, -inf, -inf,  // all -inf: the first
      0, 0, inf, 1, inf,      // +inf wins, first
  };
  EXPECT_EQ(Argmax(x, 5, 5), (std::vector<int32_t>{1, 2, 0, 0, 2}));
}

TEST(RowArgmaxTest, OddShapesBf16AndF32MatchAScan) {
  for (const auto& [rows, v] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 1031}, {5, 4099}}) {
    std::vector<float> xf = testing::RandomFloats(rows * v, 3 + v);
    std::vector<bf16> xb = testing::RandomBf16(rows * v, 5 + v);
    std::vector<int32_t> of(static_cast<size_t>(rows)), ob(static_cast<size_t>(rows));
    ASSERT_TRUE(RowArgmax(TensorView(of.data(), DType::kI32, {rows}),
                          TensorView(xf.data(), DType::kF32, {rows, v}), nullptr).ok());
    ASSERT_TRUE(RowArgmax(TensorView(ob.data(), DType::kI32, {rows}),
                          TensorView(xb.data(), DType::kBF16, {rows, v}), nullptr).ok());
    for (int64_t r = 0; r < rows; ++r) {
      int64_t bf = 0, bb = 0;
      for (int64_t j = 1; j < v; ++j) {
        if (xf[r * v + j] > xf[r * v + bf]) bf = j;
        if (xb[r * v + j].f() > xb[r * v + bb].f()) bb = j;
      }
      EXPECT_EQ(of[r], bf) << rows << "x" << v << " row " << r;
      EXPECT_EQ(ob[r], bb) << rows << "x" << v << " row " << r;
    }
  }
}

TEST(RowArgmaxTest, RejectsBadArguments) {
  std::vector<float> x(12);
  std::vector<int32_t> out(3);
  std::vector<uint8_t> bytes(12);
  const TensorView o(out.data(), DType::kI32, {3});
  EXPECT_FALSE(RowArgmax(TensorView(out.data(), DType::kI32, {2}),
                         TensorView(x.data(), DType::kF32, {3, 4}), nullptr).ok());
  EXPECT_FALSE(RowArgmax(o, TensorView(bytes.data(), DType::kU8, {3, 4}), nullptr).ok());
  EXPECT_FALSE(RowArgmax(o, TensorView(x.data(), DType::kF32, {12}), nullptr).ok());
  EXPECT_FALSE(RowArgmax(o, TensorView(x.data(), DType::kF32, {3, 0}), nullptr).ok());
  const Status s = RowArgmax(TensorView(x.data(), DType::kF32, {3}),
                             TensorView(x.data(), DType::kF32, {3, 4}), nullptr);
  EXPECT_NE(s.message().find("RowArgmax"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace tandem::kernels
