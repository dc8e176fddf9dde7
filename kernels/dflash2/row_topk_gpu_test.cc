// GPU tests of the row top-k of transformed logits: CUDA against the CPU version on odd
// vocabularies (not multiples of 8, one larger than the LM heads'), bf16 rows full of exact
// ties, f32 rows with a row stride, k from 1 to 64, and the cap's saturation ties; logit-like
// rows at the LM heads' vocabularies (one read), the largest logits all in one thread's
// share (a second read), rows of a few distinct values (the candidates overflow: the radix
// select), and every bf16 value of a range in one row.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/dflash2/row_topk.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels::dflash2 {
namespace {

struct TopKGpuCase {
  int64_t rows, vocab, k;
  float multiplier, softcap;
  bool bf16_input;
  int64_t pad;  // extra columns per row of the logits buffer
};

class RowTopKGpuTest : public ::testing::TestWithParam<TopKGpuCase> {};

TEST_P(RowTopKGpuTest, CudaMatchesCpu) {
  const auto& c = GetParam();
  const int64_t ld = c.vocab + c.pad;
  // bf16 values in [-4, 4] repeat often (exact ties); tanh arguments stay below 2, where
  // distinct inputs keep values many ulps apart on both sides.
  std::vector<float> xf = testing::RandomFloats(c.rows * ld, 21, -4, 4);
  std::vector<bf16> xb = testing::ToBf16(std::span<const float>(xf));
  const DType dt = c.bf16_input ? DType::kBF16 : DType::kF32;
  void* host = c.bf16_input ? static_cast<void*>(xb.data()) : static_cast<void*>(xf.data());
  const TensorView cl = TensorView(host, dt, {c.rows, ld}).Narrow(1, 0, c.vocab);
  std::vector<int32_t> ids(c.rows * c.k);
  std::vector<float> vals(c.rows * c.k);
  ASSERT_TRUE(cpu::RowTopK(TensorView(ids.data(), DType::kI32, {c.rows, c.k}),
                           TensorView(vals.data(), DType::kF32, {c.rows, c.k}), cl, c.multiplier,
                           c.softcap, nullptr)
                  .ok());
  Tensor gl = c.bf16_input ? testing::ToDevice(xb, dt, {c.rows, ld})
                           : testing::ToDevice(xf, dt, {c.rows, ld});
  Tensor gi = Tensor::Empty(testing::Pool(), DType::kI32, {c.rows, c.k}).value();
  Tensor gv = Tensor::Empty(testing::Pool(), DType::kF32, {c.rows, c.k}).value();
  Status st = RowTopK(gi, gv, gl.view().Narrow(1, 0, c.vocab), c.multiplier, c.softcap, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(testing::ToHost<int32_t>(gi), ids);
  // tanhf (device) vs std::tanh (host) in fp32: within a few ulp.
  EXPECT_TRUE(testing::AllClose(testing::ToHost<float>(gv), vals, 1e-6, 1e-6, "values"));
  // ids only.
  Tensor gi2 = Tensor::Empty(testing::Pool(), DType::kI32, {c.rows, c.k}).value();
  ASSERT_TRUE(
      RowTopK(gi2, TensorView(), gl.view().Narrow(1, 0, c.vocab), c.multiplier, c.softcap, nullptr)
          .ok());
  EXPECT_EQ(testing::ToHost<int32_t>(gi2), ids);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowTopKGpuTest,
                         ::testing::Values(TopKGpuCase{3, 151937, 64, 1.f, 0.f, true, 0},
                                           TopKGpuCase{5, 151937, 10, 0.5f, 30.f, true, 7},
                                           TopKGpuCase{7, 1001, 64, 2.f, 5.f, false, 3},
                                           TopKGpuCase{17, 37, 37, 1.f, 0.f, false, 0},
                                           TopKGpuCase{9, 4099, 1, 0.75f, 3.f, true, 1},
                                           TopKGpuCase{2, 64, 64, 1.f, 0.f, true, 0},
                                           TopKGpuCase{1, 1, 1, 1.f, 0.f, false, 0}));

// Every logit large: the cap saturates them all to exactly the cap, so the top-k is ids
// 0 .. k-1 on both sides.
TEST(RowTopKGpu, SaturatedRowTakesLowestIds) {
  const int64_t v = 3001, k = 50;
  std::vector<float> x(v);
  for (int64_t j = 0; j < v; ++j) x[j] = 1000.f + static_cast<float>(j % 97);
  Tensor gl = testing::ToDevice(x, DType::kF32, {1, v});
  Tensor gi = Tensor::Empty(testing::Pool(), DType::kI32, {1, k}).value();
  Tensor gv = Tensor::Empty(testing::Pool(), DType::kF32, {1, k}).value();
  ASSERT_TRUE(RowTopK(gi, gv, gl, 1.f, 2.f, nullptr).ok());
  std::vector<int32_t> ids = testing::ToHost<int32_t>(gi);
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(ids[i], i);
  for (float f : testing::ToHost<float>(gv)) EXPECT_EQ(f, 2.f);
}

// CUDA against the CPU version on the rows of `logits` [rows, v].
template <typename T>
void ExpectMatchesCpu(const std::vector<T>& logits, DType dt, int64_t rows, int64_t v, int64_t k,
                      float multiplier, float softcap) {
  std::vector<int32_t> ids(rows * k);
  std::vector<float> vals(rows * k);
  ASSERT_TRUE(cpu::RowTopK(TensorView(ids.data(), DType::kI32, {rows, k}),
                           TensorView(vals.data(), DType::kF32, {rows, k}),
                           TensorView(const_cast<T*>(logits.data()), dt, {rows, v}), multiplier,
                           softcap, nullptr)
                  .ok());
  Tensor gl = testing::ToDevice(logits, dt, {rows, v});
  Tensor gi = Tensor::Empty(testing::Pool(), DType::kI32, {rows, k}).value();
  Tensor gv = Tensor::Empty(testing::Pool(), DType::kF32, {rows, k}).value();
  Status st = RowTopK(gi, gv, gl, multiplier, softcap, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(testing::ToHost<int32_t>(gi), ids);
  EXPECT_TRUE(testing::AllClose(testing::ToHost<float>(gv), vals, 1e-6, 1e-6, "values"));
}

// Logit-like rows (a uniform bulk and a few large values) at the drafters' vocabularies: the
// candidates are few, one read answers.
TEST(RowTopKGpu, LogitLikeRows) {
  for (int64_t v : {int64_t{151936}, int64_t{248320}}) {
    const int64_t rows = 6, k = 16;
    std::vector<float> x = testing::RandomFloats(rows * v, 5 + static_cast<uint64_t>(v), -3, 3);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < 40; ++i) x[r * v + (i * 7919 + r * 104729) % v] += 4.f + 0.1f * i;
    ExpectMatchesCpu(x, DType::kF32, rows, v, k, 1.f, 0.f);
    ExpectMatchesCpu(x, DType::kF32, rows, v, k, 0.7f, 30.f);
    ExpectMatchesCpu(testing::ToBf16(std::span<const float>(x)), DType::kBF16, rows, v, k, 1.f,
                     30.f);
  }
}

// The 24 largest logits at ids 4096 m, which one thread reads (16-byte loads, 512 threads):
// its four kept logits cannot hold them all, so the row is read again.
TEST(RowTopKGpu, TopEntriesInOneThread) {
  const int64_t rows = 2, v = 151936, k = 20;
  std::vector<float> x = testing::RandomFloats(rows * v, 9, -2, 2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < 24; ++m) x[r * v + m * 4096] = 10.f + 0.25f * static_cast<float>(m);
  ExpectMatchesCpu(x, DType::kF32, rows, v, k, 1.f, 0.f);
  ExpectMatchesCpu(testing::ToBf16(std::span<const float>(x)), DType::kBF16, rows, v, k, 1.f,
                   30.f);
}

// Three distinct values in 151937 entries: some 50,000 tie at the top, more than the
// fast path's candidate slots, so the radix select answers (lowest ids of the top value).
TEST(RowTopKGpu, FewDistinctValuesOverflowTheCandidates) {
  const int64_t rows = 3, v = 151937, k = 64;
  std::vector<float> u = testing::RandomFloats(rows * v, 77, 0, 3);
  std::vector<float> x(u.size());
  for (size_t i = 0; i < u.size(); ++i) x[i] = std::floor(u[i]);
  ExpectMatchesCpu(testing::ToBf16(std::span<const float>(x)), DType::kBF16, rows, v, k, 1.f,
                   0.f);
  ExpectMatchesCpu(x, DType::kF32, rows, v, k, 2.f, 5.f);
}

// Every bf16 value of [-8, 8] once, in a scrambled order, with and without the cap: the bound
// on the value just below the threshold (bf16 steps) against the CPU's full sort.
TEST(RowTopKGpu, EveryBf16ValueOfARange) {
  std::vector<bf16> row;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float f = std::bit_cast<float>(bits << 16);
    bf16 b;
    b.bits = static_cast<uint16_t>(bits);
    if (std::isfinite(f) && std::fabs(f) <= 8.f) row.push_back(b);
  }
  const int64_t v = static_cast<int64_t>(row.size());
  std::vector<bf16> scrambled(row.size());
  for (int64_t i = 0; i < v; ++i)  // 7919 is prime and does not divide v: a permutation
    scrambled[static_cast<size_t>((i * 7919) % v)] = row[static_cast<size_t>(i)];
  for (float softcap : {0.f, 30.f, 3.f})
    ExpectMatchesCpu(scrambled, DType::kBF16, 1, v, 64, 1.f, softcap);
}

}  // namespace
}  // namespace tandem::kernels::dflash2
