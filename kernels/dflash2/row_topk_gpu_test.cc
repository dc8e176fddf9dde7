// GPU tests of the row top-k of transformed logits: CUDA against the CPU version on odd
// vocabularies (not multiples of 8, one larger than the LM heads'), bf16 rows full of exact
// ties, f32 rows with a row stride, k from 1 to 64, and the cap's saturation ties.
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace tandem::kernels::dflash2
