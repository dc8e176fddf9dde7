// GPU tests of the row gather: CUDA against the CPU reference, bit for bit (a copy), on each
// copy granule (16-byte, 4-byte, single bytes, and an unaligned view that forces bytes).
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise/row_gather.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

// Indices into [0, m) with every fourth one invalid (-1 or m).
std::vector<int32_t> Indices(int64_t n, int64_t m) {
  std::vector<int32_t> r(n);
  for (int64_t i = 0; i < n; ++i)
    r[i] = i % 4 == 3 ? (i % 8 == 3 ? -1 : static_cast<int32_t>(m))
                      : static_cast<int32_t>((i * 7919) % m);
  return r;
}

// Gathers n rows of `cols` u8 elements from an m-row table whose device copy starts
// `skew` bytes into its allocation; CUDA must equal the CPU reference.
void CheckBytes(int64_t n, int64_t m, int64_t cols, int64_t skew) {
  std::vector<uint8_t> table(skew + m * cols);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint8_t>(i * 37 + 11);
  const std::vector<int32_t> rows = Indices(n, m);
  std::vector<uint8_t> want(n * cols);
  const TensorView host_table(table.data() + skew, DType::kU8, {m, cols});
  ASSERT_TRUE(cpu::RowGather(TensorView(want.data(), DType::kU8, {n, cols}),
                             TensorView(const_cast<int32_t*>(rows.data()), DType::kI32, {n}),
                             host_table, nullptr)
                  .ok());
  Tensor dt = testing::ToDevice(table, DType::kU8, {skew + m * cols});
  Tensor dr = testing::ToDevice(rows, DType::kI32, {n});
  Tensor dout = Tensor::Empty(testing::Pool(), DType::kU8, {n * cols + skew}).value();
  const TensorView out = dout.view().Narrow(0, skew, n * cols).Reshape({n, cols});
  const TensorView tab = dt.view().Narrow(0, skew, m * cols).Reshape({m, cols});
  ASSERT_TRUE(RowGather(out, dr, tab, nullptr).ok());
  EXPECT_EQ(testing::ToHost<uint8_t>(out), want) << n << "x" << cols << " skew " << skew;
}

TEST(RowGatherGpuTest, CudaMatchesCpuOnEveryGranule) {
  CheckBytes(8192, 7600, 8192, 0);  // 16-byte units (a bf16 [R, 4096] hidden row)
  CheckBytes(1000, 999, 12, 0);     // 4-byte units
  CheckBytes(8192, 7000, 1, 0);     // single bytes (u8 [R] correctness)
  CheckBytes(300, 200, 64, 1);      // unaligned view: single bytes
}

TEST(RowGatherGpuTest, Bf16Rows) {
  constexpr int64_t kM = 33, kH = 4096, kN = 50;
  const std::vector<bf16> table = testing::RandomBf16(kM * kH, 3);
  const std::vector<int32_t> rows = Indices(kN, kM);
  std::vector<bf16> want(kN * kH);
  ASSERT_TRUE(cpu::RowGather(TensorView(want.data(), DType::kBF16, {kN, kH}),
                             TensorView(const_cast<int32_t*>(rows.data()), DType::kI32, {kN}),
                             TensorView(const_cast<bf16*>(table.data()), DType::kBF16, {kM, kH}),
                             nullptr)
                  .ok());
  Tensor dt = testing::ToDevice(table, DType::kBF16, {kM, kH});
  Tensor dr = testing::ToDevice(rows, DType::kI32, {kN});
  Tensor dout = Tensor::Empty(testing::Pool(), DType::kBF16, {kN, kH}).value();
  ASSERT_TRUE(RowGather(dout, dr, dt, nullptr).ok());
  const std::vector<bf16> got = testing::ToHost<bf16>(dout);
  for (int64_t i = 0; i < kN * kH; ++i)
    ASSERT_EQ(got[i].bits, want[i].bits) << i;
}

}  // namespace
}  // namespace tandem::kernels
