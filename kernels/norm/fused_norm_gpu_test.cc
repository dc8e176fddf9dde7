// GPU tests of the fused RMSNorm ops: CUDA against the CPU reference (fused_norm_cpu.cc)
// over model, odd (scalar path) and many-row shapes; dw bitwise repeatable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/norm/fused_norm.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::ToDevice;
using testing::ToHost;

// CUDA and CPU differ before the single output rounding only by fp32 effects (sum order,
// sincosf vs std::sin, FMA contraction: ~1e-6 relative to the terms), which may flip one bf16
// ulp of the output; where a rotation or difference cancels, that fp32 error is relative to
// the terms, so an absolute 1e-4 of the largest output covers it.
constexpr double kUlpRtol = testing::kOneBf16UlpRtol;
double Atol(const std::vector<bf16>& v) {
  double m = 0;
  for (bf16 x : v) m = std::max(m, std::abs(static_cast<double>(x.f())));
  return 1e-4 * m + 1e-6;
}

// dw sums `rows` fp32 terms of magnitude <~ 1 in a different order on each side (CPU: one
// running sum; CUDA: per-block partials, then a tree); the running sum's rounding error
// random-walks to ~6e-8 * rows / sqrt(2), so 2e-7 * rows bounds it with margin.
double DwAtol(int64_t rows) { return 2e-7 * static_cast<double>(rows) + 1e-5; }

std::vector<float> Workspace(int64_t cols) {
  return std::vector<float>(RmsNormBackwardWorkspaceRows() * cols);
}

struct HeadCase {
  int64_t tokens, heads, d;
};

class NormRopeGpuTest : public ::testing::TestWithParam<HeadCase> {};

TEST_P(NormRopeGpuTest, CudaMatchesCpu) {
  const auto [t, heads, d] = GetParam();
  const int64_t n = t * heads * d, rows = t * heads;
  const Shape s{t, heads, d};
  std::vector<bf16> x = RandomBf16(n, 1, -2, 2), w = RandomBf16(d, 2, 0.5f, 1.5f);
  std::vector<bf16> dy = RandomBf16(n, 3), y(n), dx(n);
  std::vector<int32_t> pos(t);
  for (int64_t i = 0; i < t; ++i) pos[i] = static_cast<int32_t>((i * 131) % 8192);
  std::vector<float> rstd(rows), dw(d, 0.5f);
  auto bv = [&](std::vector<bf16>& v) { return TensorView(v.data(), DType::kBF16, s); };
  const TensorView cw(w.data(), DType::kBF16, {d}), cp(pos.data(), DType::kI32, {t});
  ASSERT_TRUE(cpu::RmsNormRopeForward(bv(y), TensorView(rstd.data(), DType::kF32, {rows}),
                                      bv(x), cw, cp, 1e-6f, 1e6, nullptr)
                  .ok());
  ASSERT_TRUE(cpu::RopeRmsNormBackward(bv(dx), TensorView(dw.data(), DType::kF32, {d}), bv(dy),
                                       bv(x), cw, TensorView(rstd.data(), DType::kF32, {rows}),
                                       cp, 1e6, TensorView(), nullptr)
                  .ok());

  Tensor gx = ToDevice(x, DType::kBF16, s), gw = ToDevice(w, DType::kBF16, {d}),
         gdy = ToDevice(dy, DType::kBF16, s), gp = ToDevice(pos, DType::kI32, {t});
  Tensor gy = Tensor::Empty(testing::Pool(), DType::kBF16, s).value();
  Tensor gdx = Tensor::Empty(testing::Pool(), DType::kBF16, s).value();
  Tensor gr = Tensor::Empty(testing::Pool(), DType::kF32, {rows}).value();
  Tensor gws = ToDevice(Workspace(d), DType::kF32, {RmsNormBackwardWorkspaceRows(), d});
  ASSERT_TRUE(RmsNormRopeForward(gy, gr, gx, gw, gp, 1e-6f, 1e6, nullptr).ok());
  EXPECT_TRUE(AllClose(ToHost<bf16>(gy), y, Atol(y), kUlpRtol, "y"));
  EXPECT_TRUE(AllClose(ToHost<float>(gr), rstd, 0, 1e-5, "rstd"));
  std::vector<float> first;
  for (int rep = 0; rep < 2; ++rep) {
    Tensor gdw = ToDevice(std::vector<float>(d, 0.5f), DType::kF32, {d});
    ASSERT_TRUE(RopeRmsNormBackward(gdx, gdw, gdy, gx, gw, gr, gp, 1e6, gws, nullptr).ok());
    std::vector<float> got = ToHost<float>(gdw);
    if (rep == 0) {
      EXPECT_TRUE(AllClose(ToHost<bf16>(gdx), dx, Atol(dx), kUlpRtol, "dx"));
      EXPECT_TRUE(AllClose(std::span<const float>(got), dw, DwAtol(rows), 1e-4, "dw"));
      first = got;
    } else {
      EXPECT_EQ(got, first) << "dw is not bitwise repeatable";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeGpuTest,
                         ::testing::Values(HeadCase{37, 3, 128}, HeadCase{5, 2, 64},
                                           HeadCase{4, 3, 6}, HeadCase{3, 1, 512},
                                           HeadCase{20000, 4, 128}));

struct RowCase {
  int64_t rows, h;
};

class FusedHiddenNormGpuTest : public ::testing::TestWithParam<RowCase> {};

TEST_P(FusedHiddenNormGpuTest, CudaMatchesCpu) {
  const auto [rows, h] = GetParam();
  const Shape s{rows, h};
  std::vector<bf16> a = RandomBf16(rows * h, 4, -2, 2), b = RandomBf16(rows * h, 5, -2, 2);
  std::vector<bf16> w = RandomBf16(h, 6, 0.5f, 1.5f), hs(rows * h), y(rows * h);
  std::vector<bf16> res = RandomBf16(rows * h, 7), dy16 = RandomBf16(rows * h, 8);
  std::vector<float> dy32 = testing::RandomFloats(rows * h, 9), rstd(rows);
  auto bv = [&](std::vector<bf16>& v) { return TensorView(v.data(), DType::kBF16, s); };
  const TensorView cw(w.data(), DType::kBF16, {h}), cr(rstd.data(), DType::kF32, {rows});
  ASSERT_TRUE(cpu::AddRmsNormForward(bv(hs), bv(y), cr, bv(a), bv(b), cw, 1e-6f, nullptr).ok());

  Tensor ga = ToDevice(a, DType::kBF16, s), gb = ToDevice(b, DType::kBF16, s),
         gw = ToDevice(w, DType::kBF16, {h});
  Tensor gy = Tensor::Empty(testing::Pool(), DType::kBF16, s).value();
  Tensor gr = Tensor::Empty(testing::Pool(), DType::kF32, {rows}).value();
  // In place: h overwrites a, as the drafter uses it.
  ASSERT_TRUE(AddRmsNormForward(ga, gy, gr, ga, gb, gw, 1e-6f, nullptr).ok());
  EXPECT_TRUE(testing::BitEqual(ToHost<bf16>(ga), hs));  // one fp32 add, one rounding
  EXPECT_TRUE(AllClose(ToHost<bf16>(gy), y, Atol(y), kUlpRtol, "y"));
  EXPECT_TRUE(AllClose(ToHost<float>(gr), rstd, 0, 1e-5, "rstd"));
  // Without b: the norm of the stored sum, bitwise the fused call's y and rstd.
  Tensor gy2 = Tensor::Empty(testing::Pool(), DType::kBF16, s).value();
  Tensor gr2 = Tensor::Empty(testing::Pool(), DType::kF32, {rows}).value();
  ASSERT_TRUE(
      AddRmsNormForward(TensorView(), gy2, gr2, ga, TensorView(), gw, 1e-6f, nullptr).ok());
  EXPECT_TRUE(testing::BitEqual(ToHost<bf16>(gy2), ToHost<bf16>(gy)));
  EXPECT_EQ(ToHost<float>(gr2), ToHost<float>(gr));

  Tensor gx = ToDevice(hs, DType::kBF16, s), gws =
      ToDevice(Workspace(h), DType::kF32, {RmsNormBackwardWorkspaceRows(), h});
  for (bool f32 : {false, true}) {
    SCOPED_TRACE(f32 ? "f32 dy" : "bf16 dy");
    std::vector<bf16> want = res;
    std::vector<float> dw(h, 0.5f);
    const TensorView cdy = f32 ? TensorView(dy32.data(), DType::kF32, s) : bv(dy16);
    ASSERT_TRUE(cpu::RmsNormBackwardAdd(bv(want), TensorView(dw.data(), DType::kF32, {h}), cdy,
                                        bv(hs), cw, cr, TensorView(), nullptr)
                    .ok());
    Tensor gdy = f32 ? ToDevice(dy32, DType::kF32, s) : ToDevice(dy16, DType::kBF16, s);
    std::vector<float> first;
    for (int rep = 0; rep < 2; ++rep) {
      Tensor gres = ToDevice(res, DType::kBF16, s);
      Tensor gdw = ToDevice(std::vector<float>(h, 0.5f), DType::kF32, {h});
      ASSERT_TRUE(RmsNormBackwardAdd(gres, gdw, gdy, gx, gw, gr, gws, nullptr).ok());
      std::vector<float> got = ToHost<float>(gdw);
      if (rep == 0) {
        EXPECT_TRUE(AllClose(ToHost<bf16>(gres), want, Atol(want), kUlpRtol, "dres"));
        EXPECT_TRUE(AllClose(std::span<const float>(got), dw, DwAtol(rows), 1e-4, "dw"));
        first = got;
      } else {
        EXPECT_EQ(got, first) << "dw is not bitwise repeatable";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedHiddenNormGpuTest,
                         ::testing::Values(RowCase{33, 4096}, RowCase{7, 64}, RowCase{3, 100},
                                           RowCase{1500, 4096}, RowCase{5, 12288},
                                           RowCase{64, 1}));

}  // namespace
}  // namespace tandem::kernels
