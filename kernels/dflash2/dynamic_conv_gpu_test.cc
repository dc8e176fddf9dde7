// GPU tests of the dynamic convolution: CUDA against the CPU version over odd and model
// shapes (every dd path: in-thread, shuffle, generic; vectorized and element-wise loads),
// strided d / y / dx / dd views, the fused residual add, and bitwise determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>

#include "kernels/dflash2/dynamic_conv.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::Pool;
using testing::RandomBf16;

// Both sides compute in fp32 (products and sums in the same order for y and dx; FMA
// contraction may differ), so an output may round to the neighbouring bf16: one ulp. dd sums
// a group's channels in a different order (tree vs sequential): fp32 noise on top. Terms are
// below ~16 in size, so an fp32 difference is below ~1e-6 absolute where sums cancel: atol.
constexpr double kRtol = testing::kOneBf16UlpRtol;

struct GpuCase {
  int64_t rows, hidden, taps, group, block_size;
  int64_t pad;  // extra columns of the y / dx / d / dd buffers (0: contiguous)
};

Tensor Empty(DType t, Shape s) { return Tensor::Empty(Pool(), t, s).value(); }

class DynamicConvGpuTest : public ::testing::TestWithParam<GpuCase> {};

TEST_P(DynamicConvGpuTest, CudaMatchesCpu) {
  const auto [rows, h, taps, group, bs, pad] = GetParam();
  const int64_t kg = taps * (h / group), ld_d = 2 * kg + pad, ld_y = h + pad;
  std::vector<bf16> x = RandomBf16(rows * h, 1, -2, 2), base = RandomBf16(taps * h, 2);
  std::vector<bf16> d = RandomBf16(rows * ld_d, 3), dy = RandomBf16(rows * ld_y, 4);
  std::vector<bf16> y0 = RandomBf16(rows * ld_y, 5);
  const TensorView cx(x.data(), DType::kBF16, {rows, h}), cb(base.data(), DType::kBF16, {taps, h});
  const TensorView cd = TensorView(d.data(), DType::kBF16, {rows, ld_d}).Narrow(1, kg, kg);
  const TensorView cdy = TensorView(dy.data(), DType::kBF16, {rows, ld_y}).Narrow(1, 0, h);
  Tensor gx = testing::ToDevice(x, DType::kBF16, {rows, h});
  Tensor gb = testing::ToDevice(base, DType::kBF16, {taps, h});
  Tensor gd = testing::ToDevice(d, DType::kBF16, {rows, ld_d});
  Tensor gdy = testing::ToDevice(dy, DType::kBF16, {rows, ld_y});
  const TensorView vd = gd.view().Narrow(1, kg, kg), vdy = gdy.view().Narrow(1, 0, h);

  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    std::vector<bf16> y = y0;
    ASSERT_TRUE(
        cpu::DynamicConvForward(TensorView(y.data(), DType::kBF16, {rows, ld_y}).Narrow(1, 0, h),
                                cx, cb, cd, group, bs, accumulate, nullptr)
            .ok());
    Tensor gy = testing::ToDevice(y0, DType::kBF16, {rows, ld_y});
    Status st =
        DynamicConvForward(gy.view().Narrow(1, 0, h), gx, gb, vd, group, bs, accumulate, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // The padding columns are compared too: they must keep y0's values on both sides.
    EXPECT_TRUE(AllClose(testing::ToHost<bf16>(gy), y, 1e-5, kRtol, "y"));
  }

  std::vector<bf16> dx(rows * ld_y, bf16(3.f)), dd(rows * ld_d, bf16(3.f));
  std::vector<float> dbase(taps * h, 0.25f);
  ASSERT_TRUE(
      cpu::DynamicConvBackward(TensorView(dx.data(), DType::kBF16, {rows, ld_y}).Narrow(1, 0, h),
                               TensorView(dbase.data(), DType::kF32, {taps, h}),
                               TensorView(dd.data(), DType::kBF16, {rows, ld_d}).Narrow(1, kg, kg),
                               cdy, cx, cb, cd, group, bs, TensorView(), nullptr)
          .ok());
  Tensor ws =
      Empty(DType::kU8, {std::max<int64_t>(1, DynamicConvBackwardWorkspaceBytes(rows, h, taps))});
  std::vector<float> db_first;
  std::vector<bf16> dx_first, dd_first;
  for (int run = 0; run < 2; ++run) {
    Tensor gdx =
        testing::ToDevice(std::vector<bf16>(rows * ld_y, bf16(3.f)), DType::kBF16, {rows, ld_y});
    Tensor gdd =
        testing::ToDevice(std::vector<bf16>(rows * ld_d, bf16(3.f)), DType::kBF16, {rows, ld_d});
    Tensor gdb = testing::ToDevice(std::vector<float>(taps * h, 0.25f), DType::kF32, {taps, h});
    Status st = DynamicConvBackward(gdx.view().Narrow(1, 0, h), gdb, gdd.view().Narrow(1, kg, kg),
                                    vdy, gx, gb, vd, group, bs, ws, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<bf16> got_dx = testing::ToHost<bf16>(gdx), got_dd = testing::ToHost<bf16>(gdd);
    std::vector<float> got_db = testing::ToHost<float>(gdb);
    if (run == 0) {
      EXPECT_TRUE(AllClose(got_dx, dx, 1e-5, kRtol, "dx"));
      // dd: a group of up to 256 products of size <= 2 summed in another order: ~1e-5 abs.
      EXPECT_TRUE(AllClose(got_dd, dd, 1e-4, kRtol, "dd"));
      // dbase: sums over all rows in another order (tiles, then tiles of tiles).
      EXPECT_TRUE(AllClose(got_db, dbase, 1e-4 * (1 + rows / 64.0), 1e-5, "dbase"));
      db_first = got_db;
      dx_first = got_dx;
      dd_first = got_dd;
    } else {
      EXPECT_TRUE(testing::BitEqual(got_dx, dx_first));
      EXPECT_TRUE(testing::BitEqual(got_dd, dd_first));
      for (size_t i = 0; i < got_db.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got_db[i]), std::bit_cast<uint32_t>(db_first[i])) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DynamicConvGpuTest,
    ::testing::Values(GpuCase{37, 33, 3, 3, 5, 0},          // odd H: element-wise, generic dd
                      GpuCase{37, 33, 3, 3, 5, 3},          // ... strided
                      GpuCase{200, 64, 2, 16, 16, 0},       // shuffle over 2 lanes
                      GpuCase{200, 64, 2, 16, 16, 8},       // ... strided, still aligned
                      GpuCase{201, 64, 2, 16, 16, 5},       // ... strided, unaligned rows
                      GpuCase{130, 256, 3, 1, 5, 0},        // dd in thread, group 1
                      GpuCase{70, 48, 2, 4, 1, 8},          // group 4, blocks of one row
                      GpuCase{100, 96, 2, 12, 16, 0},       // group 12: per-channel d, generic dd
                      GpuCase{300, 1024, 2, 128, 16, 0},    // shuffle over 16 lanes
                      GpuCase{65, 512, 4, 256, 7, 0},       // shuffle over 32 lanes
                      GpuCase{90, 1024, 2, 512, 16, 0},     // group 512: generic dd
                      GpuCase{33, 40, 1, 8, 3, 0},          // K = 1, one lane per group
                      GpuCase{129, 2048, 8, 16, 16, 0},     // K = 8
                      GpuCase{1, 64, 2, 16, 16, 0},         // one row
                      GpuCase{1000, 5120, 2, 16, 16, 0}));  // the 27B drafter's width

TEST(DynamicConvGpu, RejectsSmallWorkspaceAndTooManyTaps) {
  const int64_t rows = 70, h = 64, taps = 2, g = 4;
  Tensor x = Empty(DType::kBF16, {rows, h}), b = Empty(DType::kBF16, {taps, h});
  Tensor d = Empty(DType::kBF16, {rows, taps * g}), dx = Empty(DType::kBF16, {rows, h});
  Tensor dd = Empty(DType::kBF16, {rows, taps * g}), dy = Empty(DType::kBF16, {rows, h});
  Tensor db = Empty(DType::kF32, {taps, h});
  Tensor ws = Empty(DType::kU8, {DynamicConvBackwardWorkspaceBytes(rows, h, taps) - 4});
  EXPECT_FALSE(DynamicConvBackward(dx, db, dd, dy, x, b, d, 16, 16, ws, nullptr).ok());
  Tensor b9 = Empty(DType::kBF16, {9, h}), d9 = Empty(DType::kBF16, {rows, 9 * g});
  EXPECT_FALSE(DynamicConvForward(dx, x, b9, d9, 16, 16, false, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels::dflash2
