// cpu::DynamicConvForward/Backward (bf16 views, fp32 math) against the float64 reference of
// grouped_dynamic_conv.h on odd shapes: rows not a multiple of the block, blocks of 1, 5 and
// 16 rows, K = 1, 2, 3, group 1, 3 (odd H), 4 and 16, strided d / y / dd views, the fused
// residual add, dbase accumulation, and the argument checks.
#include "kernels/dflash2/dynamic_conv.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/dflash2/grouped_dynamic_conv.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::RandomBf16;
using testing::ToDouble;

// fp32 math against float64, then one bf16 rounding on each side of the comparison: the
// two may round to neighbouring bf16 values (one ulp, 2^-7 relative), plus fp32 noise.
constexpr double kRtol = 1.0 / 128 + 1e-4;
constexpr double kAtol = 1e-5;

struct ConvCase {
  int64_t rows, hidden, taps, group, block_size;
};

class DynamicConvCpuTest : public ::testing::TestWithParam<ConvCase> {};

std::vector<double> Bf16ToDouble(const std::vector<bf16>& v) {
  return ToDouble(std::span<const bf16>(v));
}

TEST_P(DynamicConvCpuTest, MatchesFloat64Reference) {
  const auto [rows, h, taps, group, bs] = GetParam();
  const int64_t g = h / group, kg = taps * g, ld_d = 2 * kg, ld_y = h + 5;
  const ConvShape shape{.rows = rows, .hidden = h, .taps = taps, .group = group};
  std::vector<bf16> x = RandomBf16(rows * h, 1, -2, 2), base = RandomBf16(taps * h, 2);
  std::vector<bf16> d_full = RandomBf16(rows * ld_d, 3), dy = RandomBf16(rows * h, 4);
  std::vector<bf16> y_full = RandomBf16(rows * ld_y, 5);  // the residual for accumulate
  std::vector<int32_t> pos(rows);
  for (int64_t t = 0; t < rows; ++t) pos[t] = static_cast<int32_t>(t % bs);

  // float64 reference on the bf16 inputs; side 1 of d (columns kg .. 2 kg).
  const std::vector<double> xd = Bf16ToDouble(x), bd = Bf16ToDouble(base),
                            dd_full = Bf16ToDouble(d_full), dyd = Bf16ToDouble(dy);
  std::vector<double> y_ref(rows * h);
  GroupedDynamicConvForward<double>(shape, xd.data(), bd.data(), dd_full.data() + kg, ld_d,
                                    pos.data(), y_ref.data());
  std::vector<double> dx_ref(rows * h, 0), db_ref(taps * h, 0.5), dd_ref(rows * ld_d, 0);
  GroupedDynamicConvBackward<double>(shape, xd.data(), bd.data(), dd_full.data() + kg, ld_d,
                                     pos.data(), dyd.data(), dx_ref.data(), db_ref.data(),
                                     dd_ref.data() + kg);

  const TensorView vx(x.data(), DType::kBF16, {rows, h}), vb(base.data(), DType::kBF16, {taps, h});
  const TensorView vd = TensorView(d_full.data(), DType::kBF16, {rows, ld_d}).Narrow(1, kg, kg);
  for (bool accumulate : {false, true}) {
    std::vector<bf16> y = y_full;
    const TensorView vy = TensorView(y.data(), DType::kBF16, {rows, ld_y}).Narrow(1, 0, h);
    ASSERT_TRUE(cpu::DynamicConvForward(vy, vx, vb, vd, group, bs, accumulate, nullptr).ok());
    std::vector<double> got, want;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t c = 0; c < h; ++c) {
        got.push_back(y[t * ld_y + c].f());
        const double add = accumulate ? y_full[t * ld_y + c].f() : 0.0;
        want.push_back(add + y_ref[t * h + c]);
      }
    EXPECT_TRUE(AllClose(got, want, kAtol, kRtol, accumulate ? "y (accumulate)" : "y"));
    for (int64_t t = 0; t < rows; ++t)  // the padding columns are not touched
      for (int64_t c = h; c < ld_y; ++c) ASSERT_EQ(y[t * ld_y + c].bits, y_full[t * ld_y + c].bits);
  }

  std::vector<bf16> dx(rows * h, bf16(7.f)), dd_out(rows * ld_d, bf16(7.f));
  std::vector<float> dbase(taps * h, 0.5f);
  ASSERT_TRUE(cpu::DynamicConvBackward(
                  TensorView(dx.data(), DType::kBF16, {rows, h}),
                  TensorView(dbase.data(), DType::kF32, {taps, h}),
                  TensorView(dd_out.data(), DType::kBF16, {rows, ld_d}).Narrow(1, kg, kg),
                  TensorView(dy.data(), DType::kBF16, {rows, h}), vx, vb, vd, group, bs,
                  TensorView(), nullptr)
                  .ok());
  EXPECT_TRUE(AllClose(Bf16ToDouble(dx), dx_ref, kAtol, kRtol, "dx"));
  EXPECT_TRUE(AllClose(ToDouble(std::span<const float>(dbase)), db_ref, 1e-4, 1e-5, "dbase"));
  std::vector<double> dd_got, dd_want;
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < kg; ++j) ASSERT_EQ(dd_out[t * ld_d + j].f(), 7.f) << "side 0 kept";
    for (int64_t j = kg; j < ld_d; ++j) {
      dd_got.push_back(dd_out[t * ld_d + j].f());
      dd_want.push_back(dd_ref[t * ld_d + j]);
    }
  }
  EXPECT_TRUE(AllClose(dd_got, dd_want, kAtol, kRtol, "dd"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, DynamicConvCpuTest,
                         ::testing::Values(ConvCase{37, 33, 3, 3, 5}, ConvCase{20, 48, 2, 16, 16},
                                           ConvCase{9, 10, 1, 1, 1}, ConvCase{50, 64, 3, 16, 16},
                                           ConvCase{11, 16, 2, 1, 5}, ConvCase{7, 12, 3, 4, 1},
                                           ConvCase{1, 8, 2, 8, 16}, ConvCase{0, 16, 2, 16, 16}));

// Taps reset at block starts: convolving two blocks packed is convolving each alone.
TEST(DynamicConvCpu, BlocksAreIndependent) {
  const int64_t bs = 4, rows = 2 * bs, h = 8, taps = 3, g = 2;
  std::vector<bf16> x = RandomBf16(rows * h, 11), base = RandomBf16(taps * h, 12);
  std::vector<bf16> d = RandomBf16(rows * taps * g, 13);
  std::vector<bf16> y(rows * h), y2(bs * h);
  const TensorView vb(base.data(), DType::kBF16, {taps, h});
  ASSERT_TRUE(cpu::DynamicConvForward(TensorView(y.data(), DType::kBF16, {rows, h}),
                                      TensorView(x.data(), DType::kBF16, {rows, h}), vb,
                                      TensorView(d.data(), DType::kBF16, {rows, taps * g}), h / g,
                                      bs, false, nullptr)
                  .ok());
  ASSERT_TRUE(
      cpu::DynamicConvForward(TensorView(y2.data(), DType::kBF16, {bs, h}),
                              TensorView(x.data() + bs * h, DType::kBF16, {bs, h}), vb,
                              TensorView(d.data() + bs * taps * g, DType::kBF16, {bs, taps * g}),
                              h / g, rows, false, nullptr)
          .ok());
  for (int64_t i = 0; i < bs * h; ++i) EXPECT_EQ(y[bs * h + i].bits, y2[i].bits) << i;
}

TEST(DynamicConvCpu, RejectsBadArguments) {
  std::vector<bf16> x(6 * 8), y(6 * 8), base(2 * 8), d(6 * 2 * 4);
  const TensorView vx(x.data(), DType::kBF16, {6, 8}), vy(y.data(), DType::kBF16, {6, 8}),
      vb(base.data(), DType::kBF16, {2, 8}), vd(d.data(), DType::kBF16, {6, 8});
  EXPECT_TRUE(cpu::DynamicConvForward(vy, vx, vb, vd, 2, 4, false, nullptr).ok());
  // group 3 does not divide H = 8.
  EXPECT_FALSE(cpu::DynamicConvForward(vy, vx, vb, vd, 3, 4, false, nullptr).ok());
  // d's width must be K * G = 8 (group 2), not 4 (group 4).
  EXPECT_FALSE(cpu::DynamicConvForward(vy, vx, vb, vd, 4, 4, false, nullptr).ok());
  EXPECT_FALSE(cpu::DynamicConvForward(vy, vx, vb, vd, 2, 0, false, nullptr).ok());
  EXPECT_FALSE(cpu::DynamicConvForward(vx, vx, vb, vd, 2, 4, false, nullptr).ok());  // y == x
  const Status st = cpu::DynamicConvForward(vy, vx, vb, vd, 3, 4, false, nullptr);
  EXPECT_NE(st.message().find("group"), std::string::npos) << st.message();

  std::vector<bf16> dx(6 * 8), dd(6 * 8);
  std::vector<float> db(2 * 8);
  const TensorView vdx(dx.data(), DType::kBF16, {6, 8}), vdd(dd.data(), DType::kBF16, {6, 8}),
      vdb(db.data(), DType::kF32, {2, 8});
  EXPECT_TRUE(cpu::DynamicConvBackward(vdx, vdb, vdd, vy, vx, vb, vd, 2, 4, {}, nullptr).ok());
  EXPECT_FALSE(cpu::DynamicConvBackward(vy, vdb, vdd, vy, vx, vb, vd, 2, 4, {}, nullptr).ok());
  EXPECT_FALSE(cpu::DynamicConvBackward(vdx, vdb, vd, vy, vx, vb, vd, 2, 4, {}, nullptr).ok());
  EXPECT_FALSE(cpu::DynamicConvBackward(vdx, vdx, vdd, vy, vx, vb, vd, 2, 4, {}, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels::dflash2
