// CPU tests of the row gather: valid and invalid indices over several dtypes and row
// shapes, repeated rows, and the argument checks.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_gather.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

TEST(RowGatherTest, Bf16RowsWithInvalidIndicesZeroed) {
  constexpr int64_t kM = 5, kH = 7;
  const std::vector<bf16> table = testing::RandomBf16(kM * kH, 1);
  const std::vector<int32_t> rows = {4, -1, 0, 5, 4, 2, 1 << 30};
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<bf16> out(n * kH, bf16(9.f));
  ASSERT_TRUE(RowGather(TensorView(out.data(), DType::kBF16, {n, kH}),
                        TensorView(const_cast<int32_t*>(rows.data()), DType::kI32, {n}),
                        TensorView(const_cast<bf16*>(table.data()), DType::kBF16, {kM, kH}),
                        nullptr)
                  .ok());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < kH; ++c) {
      const bool valid = rows[i] >= 0 && rows[i] < kM;
      const float want = valid ? table[rows[i] * kH + c].f() : 0.f;
      EXPECT_EQ(out[i * kH + c].f(), want) << "row " << i << " col " << c;
    }
}

TEST(RowGatherTest, BytesAndThreeDimensionalRows) {
  // u8 [N] (one byte a row), as the drafter scatters per-row correctness.
  const std::vector<uint8_t> flags = {1, 0, 1, 1};
  const std::vector<int32_t> slots = {-1, 0, 3, -1, 2, 1};
  std::vector<uint8_t> out(slots.size(), 7);
  ASSERT_TRUE(RowGather(TensorView(out.data(), DType::kU8, {6}),
                        TensorView(const_cast<int32_t*>(slots.data()), DType::kI32, {6}),
                        TensorView(const_cast<uint8_t*>(flags.data()), DType::kU8, {4}),
                        nullptr)
                  .ok());
  EXPECT_EQ(out, (std::vector<uint8_t>{0, 1, 1, 0, 1, 0}));
  // f32 [M, 2, 3]: whole 2x3 rows move.
  std::vector<float> t3(3 * 6), o3(2 * 6);
  for (size_t i = 0; i < t3.size(); ++i) t3[i] = static_cast<float>(i);
  const std::vector<int32_t> r3 = {2, 0};
  ASSERT_TRUE(RowGather(TensorView(o3.data(), DType::kF32, {2, 2, 3}),
                        TensorView(const_cast<int32_t*>(r3.data()), DType::kI32, {2}),
                        TensorView(t3.data(), DType::kF32, {3, 2, 3}), nullptr)
                  .ok());
  for (int c = 0; c < 6; ++c) {
    EXPECT_EQ(o3[c], t3[12 + c]);
    EXPECT_EQ(o3[6 + c], t3[c]);
  }
}

TEST(RowGatherTest, RejectsMismatchedArguments) {
  std::vector<float> table(4 * 3), out(2 * 3);
  std::vector<int32_t> rows = {0, 1};
  const TensorView t(table.data(), DType::kF32, {4, 3}), r(rows.data(), DType::kI32, {2});
  EXPECT_FALSE(RowGather(TensorView(out.data(), DType::kF32, {2, 2}), r, t, nullptr).ok());
  EXPECT_FALSE(RowGather(TensorView(out.data(), DType::kF32, {3, 2}), r, t, nullptr).ok());
  EXPECT_FALSE(RowGather(TensorView(out.data(), DType::kI32, {2, 3}), r, t, nullptr).ok());
  EXPECT_FALSE(RowGather(TensorView(out.data(), DType::kF32, {2, 3}),
                         TensorView(rows.data(), DType::kF32, {2}), t, nullptr)
                   .ok());
  EXPECT_TRUE(RowGather(TensorView(out.data(), DType::kF32, {2, 3}), r, t, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels
