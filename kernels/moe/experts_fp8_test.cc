// The row-wise FP8 expert path's CPU version (experts_fp8.h), the reference twin of the CUDA
// one: both layouts against the float64 definition over the dequantized e4m3 weights and
// activations on odd shapes (H and I not multiples of 16, an expert without rows, one expert
// with every row, every expert with the same rows as top-k = E gives); the two layouts
// against each other (bit for bit: the same sums in the same order), and the padded one
// with each token quantized once and its codes gathered against the fused gather (bit for
// bit); the bf16 path within FP8's error; the row quantizer's gather, padding and scales; the
// code gather; the unscaled GEMM; bad input refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/gemm/fp8_raw.h"
#include "kernels/moe/experts_fp8.h"
#include "kernels/moe/experts_fp8_testing.h"

namespace tandem::kernels {
namespace {

struct Case {
  const char* name;
  std::vector<int32_t> offsets;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"an empty expert and a 20-row one", {0, 3, 3, 23, 24, 41}},
      {"one expert with every row", {0, 0, 0, 37, 37, 37}},
      {"top-k = E: every expert the same rows", {0, 9, 18, 27, 36, 45}},
  };
  return cases;
}

struct Dims {
  int64_t h, i;
};
constexpr Dims kDims[] = {{200, 72}, {98, 37}};  // not multiples of 16; 37 odd

std::vector<uint16_t> Bits(const std::vector<bf16>& v) {
  std::vector<uint16_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(uint16_t));
  return b;
}

TEST(MoeFp8ExpertsTest, CpuMatchesFloat64DefinitionOnOddShapes) {
  for (const Dims d : kDims)
    for (const Case& c : Cases()) {
      const testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, d.h, d.i, c.offsets, 31);
      for (bool padded : {false, true}) {
        const testing::MoeFp8Result r =
            testing::RunMoeFp8Experts(HostAllocator(), nullptr, p, padded);
        // Left: the GEMMs' bf16 outputs (one rounding of 2^-9 relative, which can move an e4m3
        // code of act by one step) and y's own bf16 rounding.
        EXPECT_TRUE(testing::AllClose(testing::ToDouble(r.y), testing::MoeFp8ExpertsRef(p, r),
                                      2e-2, 2e-2, c.name))
            << c.name << " H=" << d.h << " I=" << d.i << (padded ? " padded" : " exact");
      }
    }
}

TEST(MoeFp8ExpertsTest, PaddedAndExactLayoutsAgreeBitForBit) {
  for (const Case& c : Cases()) {
    const testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 200, 72, c.offsets, 33);
    const testing::MoeFp8Result exact = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p,
                                                                  false);
    const testing::MoeFp8Result padded = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p,
                                                                   true);
    EXPECT_EQ(Bits(exact.y), Bits(padded.y)) << c.name;
  }
}

TEST(MoeFp8ExpertsTest, TokensQuantizedOnceAgreeWithTheFusedGather) {
  for (const Case& c : Cases()) {
    testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 200, 72, c.offsets, 34);
    const int64_t tokens = p.offsets.back() / 3;  // N >= 2T: each token quantized once
    testing::RepeatTokens(&p, tokens);
    const testing::MoeFp8Result fused = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p,
                                                                  true);
    const testing::MoeFp8Result once = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p,
                                                                 true, tokens);
    EXPECT_EQ(Bits(fused.y), Bits(once.y)) << c.name;
  }
}

TEST(MoeFp8ExpertsTest, GatherRowsCopiesCodesAndScalesAndPads) {
  const int64_t k = 24, e = 2, cap = 3;
  std::vector<uint8_t> src(4 * k);
  for (size_t c = 0; c < src.size(); ++c) src[c] = static_cast<uint8_t>(c * 7 + 1);
  std::vector<float> src_scale = {0.5f, 0.25f, 2.f, 3.f};
  std::vector<int32_t> offsets = {0, 2, 3};  // counts 2, 1: padding rows 2, 4, 5
  std::vector<int32_t> gather = {3, 1, 0, 1, 0, 0};
  std::vector<uint8_t> codes(6 * k, 0xAA);
  std::vector<float> scale(6, -1.f);
  const MoeFp8Rows rows{TensorView(offsets.data(), DType::kI32, {e + 1}), cap, e * cap};
  const TensorView sv(src.data(), DType::kF8E4M3, {4, k});
  const TensorView ssv(src_scale.data(), DType::kF32, {4});
  const TensorView gv(gather.data(), DType::kI32, {6});
  const TensorView cv(codes.data(), DType::kF8E4M3, {6, k});
  const TensorView scv(scale.data(), DType::kF32, {6});
  ASSERT_TRUE(MoeFp8GatherRows(sv, ssv, gv, rows, cv, scv, nullptr).ok());
  for (int64_t r = 0; r < 6; ++r) {
    const bool pad = r == 2 || r == 4 || r == 5;
    EXPECT_EQ(scale[r], pad ? 1.f : src_scale[gather[r]]) << r;
    for (int64_t c = 0; c < k; ++c)
      EXPECT_EQ(codes[r * k + c], pad ? 0 : src[gather[r] * k + c]) << r << " " << c;
  }
  gather[1] = 4;  // past src's rows
  Status st = MoeFp8GatherRows(sv, ssv, gv, rows, cv, scv, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("gather[1]"), std::string::npos) << st.message();
  gather[1] = 1;
  st = MoeFp8GatherRows(sv, ssv, gv, rows, cv.Narrow(0, 0, 5), scv, nullptr);
  EXPECT_NE(st.message().find("codes"), std::string::npos) << st.message();
  st = MoeFp8GatherRows(sv, ssv.Narrow(0, 0, 3), gv, rows, cv, scv, nullptr);
  EXPECT_NE(st.message().find("src_scale"), std::string::npos) << st.message();
}

TEST(MoeFp8ExpertsTest, WithinFp8ErrorOfTheBf16Path) {
  for (const Case& c : Cases()) {
    const testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 200, 72, c.offsets, 32);
    const testing::MoeFp8Result r = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p, true);
    const double err = testing::RelativeL2(r.y, testing::MoeBf16Experts(p));
    // e4m3 keeps 3 mantissa bits: rounding moves a value by up to 2^-4 of it, ~2.6% RMS on
    // uniform data, and four operands are rounded (x, W_gu, act, W_down): ~5-7% together
    // (0.060-0.065 measured here); 10% leaves room, a wrong scale or layout gives ~1.
    EXPECT_LT(err, 0.1) << c.name;
    EXPECT_GT(err, 1e-2) << c.name;  // it did run in FP8
  }
}

TEST(MoeFp8ExpertsTest, QuantizeRowsGathersPadsAndScales) {
  const int64_t k = 40, e = 2, cap = 3;
  std::vector<bf16> x = testing::RandomBf16(4 * k, 5, -3.f, 3.f);
  for (int64_t c = 0; c < k; ++c) x[2 * k + c] = bf16(0.f);  // token 2: all zeros
  std::vector<int32_t> offsets = {0, 2, 3};                   // counts 2, 1: padding rows 2, 4, 5
  std::vector<int32_t> gather = {3, 2, 0, 1, 0, 0};
  std::vector<uint8_t> codes(6 * k, 0xAA);
  std::vector<float> scale(6, -1.f);
  const MoeFp8Rows rows{TensorView(offsets.data(), DType::kI32, {e + 1}), cap, e * cap};
  const TensorView xv(x.data(), DType::kBF16, {4, k});
  const TensorView gv(gather.data(), DType::kI32, {6});
  const TensorView cv(codes.data(), DType::kF8E4M3, {6, k});
  const TensorView sv(scale.data(), DType::kF32, {6});
  ASSERT_TRUE(MoeFp8QuantizeRows(xv, gv, rows, cv, sv, nullptr).ok());
  // Row 0 is token 3: scale amax / 448, codes within half an e4m3 step of x / scale.
  float amax = 0.f;
  for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[3 * k + c].f()));
  EXPECT_EQ(scale[0], amax / kE4m3Max);
  for (int64_t c = 0; c < k; ++c) {
    const float want = x[3 * k + c].f();
    EXPECT_NEAR(E4m3ToFloat(codes[c]) * scale[0], want, std::fabs(want) / 16 + scale[0] / 512);
  }
  // Row 1 (the all-zero token) and the padding rows: scale 1, codes 0.
  for (int64_t r : {1, 2, 4, 5}) {
    EXPECT_EQ(scale[r], 1.f) << r;
    for (int64_t c = 0; c < k; ++c) EXPECT_EQ(codes[r * k + c], 0) << r << " " << c;
  }
  EXPECT_GT(scale[3], 0.f);
  EXPECT_NE(scale[3], 1.f);  // token 1, a data row of expert 1
  // A gather index past x and a code buffer too small are refused, naming what.
  gather[3] = 4;
  Status st = MoeFp8QuantizeRows(xv, gv, rows, cv, sv, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("gather[3]"), std::string::npos) << st.message();
  st = MoeFp8QuantizeRows(xv, gv, rows, cv.Narrow(0, 0, 5), sv, nullptr);
  EXPECT_NE(st.message().find("codes"), std::string::npos) << st.message();
}

TEST(MoeFp8ExpertsTest, RawGemmSumsCodeProductsPerBatch) {
  // Two batches of M=2, N=3, K=4: c = sum of the codes' values' products, no scale.
  std::vector<uint8_t> a(4 * 4), w(2 * 3 * 4);
  for (size_t j = 0; j < a.size(); ++j) a[j] = FloatToE4m3(static_cast<float>(j % 7) - 3.f);
  for (size_t j = 0; j < w.size(); ++j) w[j] = FloatToE4m3(0.5f * static_cast<float>(j % 5));
  std::vector<bf16> c(4 * 3);
  const TensorView av(a.data(), DType::kF8E4M3, {4, 4}), wv(w.data(), DType::kF8E4M3, {2, 3, 4});
  ASSERT_TRUE(Fp8GemmRaw(nullptr, av, wv, TensorView(c.data(), DType::kBF16, {4, 3}), 2, nullptr)
                  .ok());
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < 3; ++j) {
      double want = 0;
      for (int64_t p = 0; p < 4; ++p)
        want += E4m3ToFloat(a[r * 4 + p]) * E4m3ToFloat(w[((r / 2) * 3 + j) * 4 + p]);
      EXPECT_EQ(c[r * 3 + j].f(), static_cast<float>(want)) << r << " " << j;
    }
  // A batch that does not divide a's rows is refused.
  EXPECT_FALSE(Fp8GemmRaw(nullptr, av.Narrow(0, 0, 3), wv,
                          TensorView(c.data(), DType::kBF16, {3, 3}), 2, nullptr)
                   .ok());
}

TEST(MoeFp8ExpertsTest, RefusesBadWeightsAndOffsets) {
  std::vector<uint8_t> bytes(static_cast<size_t>(MoeFp8ExpertBytes(2, 16, 32)));
  int64_t off = 0;
  MoeFp8ExpertWeights w = CarveMoeFp8Experts(bytes.data(), &off, 2, 16, 32, Device::Cpu());
  EXPECT_EQ(off, static_cast<int64_t>(bytes.size()));
  ASSERT_TRUE(CheckMoeFp8Experts("test", w).ok());
  MoeFp8ExpertWeights bad = w;
  bad.down_scale = bad.down_scale.Reshape({2 * 32});
  EXPECT_NE(CheckMoeFp8Experts("test", bad).message().find("down scale"), std::string::npos);
  std::vector<bf16> x(4 * 32), gu(4 * 32);
  std::vector<uint8_t> wsb(static_cast<size_t>(MoeFp8WorkspaceBytes(2, 32, 16)));
  off = 0;
  const MoeFp8Workspace ws = CarveMoeFp8Workspace(wsb.data(), &off, 2, 32, 16, Device::Cpu());
  std::vector<int32_t> offsets = {0, 2, 1};  // decreasing
  const Status st = MoeFp8ExpertsForward(
      nullptr, w, offsets, TensorView(offsets.data(), DType::kI32, {3}), ws,
      TensorView(x.data(), DType::kBF16, {2, 32}), TensorView(gu.data(), DType::kBF16, {2, 32}),
      TensorView(x.data(), DType::kBF16, {2, 32}), nullptr);
  EXPECT_NE(st.message().find("offsets decrease at expert 1"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tandem::kernels
