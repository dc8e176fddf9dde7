// cpu::RowTopK (dflash2, transformed logits) against a full sort in float64 with ties, bf16
// and f32 inputs with a row stride, the cap's saturation ties, and the argument checks.
#include "kernels/dflash2/row_topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {
namespace {

// Reference: transform in float64, stable sort by value descending (ties keep lower ids
// first), the first k.
void Reference(const std::vector<float>& x, int64_t rows, int64_t v, int64_t ld, int64_t k,
               double m, double cap, std::vector<int32_t>* ids, std::vector<double>* vals) {
  ids->clear();
  vals->clear();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> z(v);
    for (int64_t j = 0; j < v; ++j) {
      const double xx = x[r * ld + j];
      z[j] = cap > 0 ? cap * std::tanh(m * xx / cap) : m * xx;
    }
    std::vector<int32_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
    for (int64_t i = 0; i < k; ++i) {
      ids->push_back(order[i]);
      vals->push_back(z[order[i]]);
    }
  }
}

struct TopKCase {
  int64_t rows, vocab, k;
  float multiplier, softcap;
  bool bf16_input;
};

class RowTopKCpuTest : public ::testing::TestWithParam<TopKCase> {};

TEST_P(RowTopKCpuTest, MatchesSortedReference) {
  const auto [rows, v, k, m, cap] = std::tuple(GetParam().rows, GetParam().vocab, GetParam().k,
                                               GetParam().multiplier, GetParam().softcap);
  const int64_t ld = v + 3;
  // Values on a coarse grid (multiples of 1/8 in [-4, 4]) so that rows hold many exact ties,
  // and distinct grid values stay distinct after the transform.
  std::vector<float> x = testing::RandomFloats(rows * ld, 7, -4, 4);
  for (float& f : x) f = std::round(f * 8) / 8;
  std::vector<int32_t> want_ids;
  std::vector<double> want_vals;
  Reference(x, rows, v, ld, k, m, cap, &want_ids, &want_vals);

  std::vector<bf16> xb = testing::ToBf16(std::span<const float>(x));  // exact on this grid
  const TensorView logits = GetParam().bf16_input
                                ? TensorView(xb.data(), DType::kBF16, {rows, ld}).Narrow(1, 0, v)
                                : TensorView(x.data(), DType::kF32, {rows, ld}).Narrow(1, 0, v);
  std::vector<int32_t> ids(rows * k, -1);
  std::vector<float> vals(rows * k);
  ASSERT_TRUE(cpu::RowTopK(TensorView(ids.data(), DType::kI32, {rows, k}),
                           TensorView(vals.data(), DType::kF32, {rows, k}), logits, m, cap, nullptr)
                  .ok());
  EXPECT_EQ(ids, want_ids);
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(std::span<const float>(vals)), want_vals, 1e-6,
                                1e-6, "values"));
  // ids only.
  std::vector<int32_t> ids2(rows * k, -1);
  ASSERT_TRUE(cpu::RowTopK(TensorView(ids2.data(), DType::kI32, {rows, k}), TensorView(), logits, m,
                           cap, nullptr)
                  .ok());
  EXPECT_EQ(ids2, want_ids);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowTopKCpuTest,
                         ::testing::Values(TopKCase{5, 37, 7, 1.f, 0.f, true},
                                           TopKCase{3, 101, 64, 0.5f, 30.f, false},
                                           TopKCase{4, 9, 9, 2.f, 5.f, true},
                                           TopKCase{1, 1, 1, 1.f, 0.f, false},
                                           TopKCase{2, 300, 1, 3.f, 0.f, true}));

// A small cap saturates: distinct large logits become equal z and rank by id.
TEST(RowTopKCpu, SaturatedCapTiesByLowerId) {
  std::vector<float> x = {1000.f, 2000.f, -5.f, 3000.f, 1500.f};
  std::vector<int32_t> ids(3);
  std::vector<float> vals(3);
  ASSERT_TRUE(cpu::RowTopK(TensorView(ids.data(), DType::kI32, {1, 3}),
                           TensorView(vals.data(), DType::kF32, {1, 3}),
                           TensorView(x.data(), DType::kF32, {1, 5}), 1.f, 1.f, nullptr)
                  .ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 3}));
  for (float f : vals) EXPECT_EQ(f, 1.f);
}

TEST(RowTopKCpu, RejectsBadArguments) {
  std::vector<float> x(2 * 8);
  std::vector<int32_t> ids(2 * 65);
  const TensorView vx(x.data(), DType::kF32, {2, 8});
  auto run = [&](int64_t k, float m, float cap) {
    return cpu::RowTopK(TensorView(ids.data(), DType::kI32, {2, k}), TensorView(), vx, m, cap,
                        nullptr);
  };
  EXPECT_TRUE(run(8, 1.f, 0.f).ok());
  EXPECT_FALSE(run(9, 1.f, 0.f).ok());  // k > V
  EXPECT_FALSE(run(0, 1.f, 0.f).ok());
  EXPECT_FALSE(run(4, 0.f, 0.f).ok());   // multiplier must be > 0
  EXPECT_FALSE(run(4, 1.f, -1.f).ok());  // softcap must be >= 0
  EXPECT_FALSE(run(4, NAN, 0.f).ok());
}

}  // namespace
}  // namespace tandem::kernels::dflash2
