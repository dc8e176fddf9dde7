// GPU tests of SwiGLU: CUDA against the CPU reference over odd and model shapes, with
// fused gate/up views and separate tensors.
#include <gtest/gtest.h>

#include <tuple>

#include "kernels/mlp/swiglu.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

// expf vs std::exp differ by <= 2 ulp (~1e-6 relative) before the bf16 rounding, which may
// then flip one bf16 ulp (2^-7 relative to the value).
constexpr double kUlpRtol = testing::kOneBf16UlpRtol;

// (rows, I)
class SwiGluGpuTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(SwiGluGpuTest, CudaMatchesCpuSeparateAndFused) {
  const auto [rows, inter] = GetParam();
  std::vector<bf16> gu = testing::RandomBf16(rows * 2 * inter, 1, -8, 8);
  std::vector<bf16> dout = testing::RandomBf16(rows * inter, 2), out(rows * inter);
  std::vector<bf16> dgu(rows * 2 * inter);
  TensorView cgu(gu.data(), DType::kBF16, {rows, 2 * inter});
  TensorView cdgu(dgu.data(), DType::kBF16, {rows, 2 * inter});
  auto [cg, cu] = SplitGateUp(cgu);
  auto [cdg, cdu] = SplitGateUp(cdgu);
  const TensorView cd(dout.data(), DType::kBF16, {rows, inter});
  ASSERT_TRUE(
      cpu::SwiGluForward(TensorView(out.data(), DType::kBF16, {rows, inter}), cg, cu, nullptr)
          .ok());
  ASSERT_TRUE(cpu::SwiGluBackward(cdg, cdu, cd, cg, cu, nullptr).ok());

  // Fused: views into one [rows, 2I] device tensor.
  Tensor ggu = testing::ToDevice(gu, DType::kBF16, {rows, 2 * inter}),
         gd = testing::ToDevice(dout, DType::kBF16, {rows, inter});
  Tensor gout = Tensor::Empty(testing::Pool(), DType::kBF16, {rows, inter}).value();
  Tensor gdgu = Tensor::Empty(testing::Pool(), DType::kBF16, {rows, 2 * inter}).value();
  auto [gg, gup] = SplitGateUp(ggu);
  auto [gdg, gdu] = SplitGateUp(gdgu);
  ASSERT_TRUE(SwiGluForward(gout, gg, gup, nullptr).ok());
  ASSERT_TRUE(SwiGluBackward(gdg, gdu, gd, gg, gup, nullptr).ok());
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gout), out, 1e-6, kUlpRtol, "out"));
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gdgu), dgu, 1e-6, kUlpRtol, "dgate|dup"));

  // Separate contiguous gate and up give the same bits as the fused views.
  std::vector<bf16> hg(rows * inter), hu(rows * inter);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < inter; ++c) {
      hg[r * inter + c] = gu[r * 2 * inter + c];
      hu[r * inter + c] = gu[r * 2 * inter + inter + c];
    }
  Tensor sg = testing::ToDevice(hg, DType::kBF16, {rows, inter});
  Tensor su = testing::ToDevice(hu, DType::kBF16, {rows, inter});
  Tensor sout = Tensor::Empty(testing::Pool(), DType::kBF16, {rows, inter}).value();
  ASSERT_TRUE(SwiGluForward(sout, sg, su, nullptr).ok());
  EXPECT_TRUE(testing::BitEqual(testing::ToHost<bf16>(sout), testing::ToHost<bf16>(gout)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluGpuTest,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(3, 7),
                                           std::make_tuple(1000, 127), std::make_tuple(3, 4104),
                                           std::make_tuple(1000, 5120),
                                           std::make_tuple(64, 12288)));

}  // namespace
}  // namespace tandem::kernels
