// GPU tests of RMSNorm: CUDA against the CPU reference over odd and model shapes, per-head
// shapes, and determinism of the weight gradient.
#include <gtest/gtest.h>

#include "kernels/norm/rmsnorm.h"
#include "kernels/norm/rmsnorm_ref.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

// Both sides compute in fp32 but reduce in different orders (and rsqrtf is within 2 ulp),
// so an output may land on the other side of a bf16 rounding boundary: one bf16 ulp
// (2^-7 relative to the value) plus a hair.
constexpr double kUlpRtol = testing::kOneBf16UlpRtol;

struct Case {
  int64_t rows, h;
};

class RmsNormGpuTest : public ::testing::TestWithParam<Case> {};

TEST_P(RmsNormGpuTest, CudaMatchesCpu) {
  const auto [rows, h] = GetParam();
  std::vector<bf16> x = testing::RandomBf16(rows * h, 1, -3, 3);
  std::vector<bf16> w = testing::RandomBf16(h, 2, 0.5, 1.5), dy = testing::RandomBf16(rows * h, 3);
  std::vector<bf16> y(rows * h), dx(rows * h);
  std::vector<float> rstd(rows), dw(h, 0.5f);
  const TensorView cx(x.data(), DType::kBF16, {rows, h}), cw(w.data(), DType::kBF16, {h}),
      cdy(dy.data(), DType::kBF16, {rows, h});
  ASSERT_TRUE(cpu::RmsNormForward(TensorView(y.data(), DType::kBF16, {rows, h}),
                                  TensorView(rstd.data(), DType::kF32, {rows}), cx, cw, 1e-6f,
                                  nullptr)
                  .ok());
  ASSERT_TRUE(cpu::RmsNormBackward(TensorView(dx.data(), DType::kBF16, {rows, h}),
                                   TensorView(dw.data(), DType::kF32, {h}), cdy, cx, cw,
                                   TensorView(rstd.data(), DType::kF32, {rows}), TensorView(),
                                   nullptr)
                  .ok());

  Tensor gx = testing::ToDevice(x, DType::kBF16, {rows, h}),
         gw = testing::ToDevice(w, DType::kBF16, {h});
  Tensor gdy = testing::ToDevice(dy, DType::kBF16, {rows, h});
  Tensor gy = Tensor::Empty(testing::Pool(), DType::kBF16, {rows, h}).value();
  Tensor gr = Tensor::Empty(testing::Pool(), DType::kF32, {rows}).value();
  Tensor gdx = Tensor::Empty(testing::Pool(), DType::kBF16, {rows, h}).value();
  Tensor gdw = testing::ToDevice(std::vector<float>(h, 0.5f), DType::kF32, {h});
  Tensor ws =
      Tensor::Empty(testing::Pool(), DType::kF32, {RmsNormBackwardWorkspaceRows(), h}).value();
  ASSERT_TRUE(RmsNormForward(gy, gr, gx, gw, 1e-6f, nullptr).ok());
  ASSERT_TRUE(RmsNormBackward(gdx, gdw, gdy, gx, gw, gr, ws, nullptr).ok());

  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gy), y, 1e-6, kUlpRtol, "y"));
  // rstd: fp32 sums of up to 5121 squares in different orders (~sqrt(n) * 6e-8 = 4e-6
  // relative typical), rsqrtf within 2 ulp.
  EXPECT_TRUE(testing::AllClose(testing::ToHost<float>(gr), rstd, 0, 1e-5, "rstd"));
  // dx cancels O(1) terms; fp32 ordering leaves ~1e-6 absolute before the bf16 rounding.
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gdx), dx, 1e-5, kUlpRtol, "dx"));
  // dw: sums of `rows` terms of size <= ~1, each scaled by that row's rstd (which differs by
  // up to 1e-5 relative between the two): at most 1e-5 absolute per row.
  EXPECT_TRUE(testing::AllClose(testing::ToHost<float>(gdw), dw, 1e-5 * rows, 1e-5, "dw"));

  // And directly against the float64 naive backward (same bounds as the CPU op's test:
  // one bf16 rounding on dx, 1e-5 per row on dw).
  std::vector<double> xd = testing::ToDouble(x), wd = testing::ToDouble(w),
                      dyd = testing::ToDouble(dy), rd(rows), yd(rows * h), dxd(rows * h),
                      dwd(h, 0.5);
  ref::RmsNormForward<double>(yd.data(), rd.data(), xd.data(), wd.data(), rows, h, 1e-6);
  ref::RmsNormBackward<double>(dxd.data(), dwd.data(), dyd.data(), xd.data(), wd.data(), rd.data(),
                               rows, h);
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(testing::ToHost<bf16>(gdx)), dxd, 1e-5, 1.0 / 256,
                                "dx vs f64"));
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(testing::ToHost<float>(gdw)), dwd, 1e-5 * rows,
                                1e-5, "dw vs f64"));

  // Deterministic: a second backward adds exactly the same bits again.
  std::vector<float> once = testing::ToHost<float>(gdw);
  Tensor gdw2 = testing::ToDevice(std::vector<float>(h, 0.5f), DType::kF32, {h});
  ASSERT_TRUE(RmsNormBackward(gdx, gdw2, gdy, gx, gw, gr, ws, nullptr).ok());
  std::vector<float> twice = testing::ToHost<float>(gdw2);
  for (int64_t i = 0; i < h; ++i) ASSERT_EQ(once[i], twice[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormGpuTest,
                         ::testing::Values(Case{1, 1}, Case{3, 7}, Case{1000, 7}, Case{3, 127},
                                           Case{1000, 127}, Case{1000, 128}, Case{1, 4096},
                                           Case{3, 4104}, Case{1000, 4104}, Case{1000, 5120},
                                           Case{8000, 128}, Case{3, 5121},
                                           // Many rows per block on the pipelined backward and
                                           // the warp-per-row forward, incl. idle lanes.
                                           Case{5000, 4096}, Case{777, 2048}, Case{1000, 1024}));

TEST(RmsNormPerHeadGpuTest, PerHeadMatchesCpu) {
  const int64_t t = 1000, heads = 8, d = 128;
  std::vector<bf16> x = testing::RandomBf16(t * heads * d, 4), w = testing::RandomBf16(d, 5);
  std::vector<bf16> y(x.size());
  ASSERT_TRUE(cpu::RmsNormForward(TensorView(y.data(), DType::kBF16, {t, heads, d}), TensorView(),
                                  TensorView(x.data(), DType::kBF16, {t, heads, d}),
                                  TensorView(w.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                  .ok());
  Tensor gx = testing::ToDevice(x, DType::kBF16, {t, heads, d}),
         gw = testing::ToDevice(w, DType::kBF16, {d});
  Tensor gy = Tensor::Empty(testing::Pool(), DType::kBF16, {t, heads, d}).value();
  ASSERT_TRUE(RmsNormForward(gy, TensorView(), gx, gw, 1e-6f, nullptr).ok());
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gy), y, 1e-6, kUlpRtol, "y"));
}

}  // namespace
}  // namespace tandem::kernels
