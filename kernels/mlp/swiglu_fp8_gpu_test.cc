// CUDA SwiGLU -> e4m3 against the CPU composition (SwiGluForward, then
// QuantizeFp8Activation), with gate/up as row-strided halves of one [M, 2I] buffer, M not a
// multiple of 4 and I with a partial 128-column group; and the row-tile path against the
// scalar fallback (the same buffer shifted off 16-byte alignment), bit for bit.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fp8.h"
#include "kernels/testing/fp8_testing.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::DeviceArray;
using testing::RandomBf16;

TEST(SwiGluFp8Cuda, MatchesCpuComposition) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 128}, {13, 300}, {5, 258}, {45, 264},
                      {130, 12288}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m << " I=" << n);
    auto gu = RandomBf16(m * 2 * n, 41, -4.f, 4.f);
    const int64_t mp = Fp8PaddedRows(m), ns = Fp8ActScaleElems(mp, n);
    auto [hg, hu] = SplitGateUp(TensorView(gu.data(), DType::kBF16, {m, 2 * n}));
    std::vector<uint8_t> hq(mp * n, 0xFF);
    std::vector<float> hs(ns, -1.f);
    Fp8GroupActivation ha{TensorView(hq.data(), DType::kF8E4M3, {mp, n}),
                          TensorView(hs.data(), DType::kF32, {ns})};
    ASSERT_TRUE(cpu::SwiGluFp8Forward(ha, hg, hu, nullptr).ok());
    DeviceArray<bf16> dgu(gu);
    auto [dg, du] = SplitGateUp(dgu.View(DType::kBF16, {m, 2 * n}));
    DeviceArray<uint8_t> dq(std::vector<uint8_t>(mp * n, 0xFF));
    DeviceArray<float> ds(std::vector<float>(ns, -1.f));
    Fp8GroupActivation ga{dq.View(DType::kF8E4M3, {mp, n}), ds.View(DType::kF32, {ns})};
    Status st = SwiGluFp8Forward(ga, dg, du, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // Same fp32 formula on both sides, but expf differs from the host's by an ulp or two, so
    // a bf16 value may land on its neighbour: scales agree to 2^-7, codes to one e4m3 step.
    EXPECT_EQ(testing::CompareFp8Activations(dq.ToHost(), ds.ToHost(), hq, hs, mp, n, 1.0 / 128),
              "");
  }
}

// Runs the GPU op on gate/up halves of `gu` ([m, 2n]) placed `offset` elements into a device
// buffer; returns codes and scales.
std::pair<std::vector<uint8_t>, std::vector<float>> RunOnDevice(const std::vector<bf16>& gu,
                                                                int64_t m, int64_t n,
                                                                int64_t offset) {
  std::vector<bf16> shifted(offset, bf16(0.f));
  shifted.insert(shifted.end(), gu.begin(), gu.end());
  DeviceArray<bf16> dgu(shifted);
  auto [dg, du] = SplitGateUp(
      TensorView(dgu.get() + offset, DType::kBF16, {m, 2 * n}, Device::Cuda(0)));
  const int64_t mp = Fp8PaddedRows(m), ns = Fp8ActScaleElems(mp, n);
  DeviceArray<uint8_t> dq(std::vector<uint8_t>(mp * n, 0xFF));
  DeviceArray<float> ds(std::vector<float>(ns, -1.f));
  Fp8GroupActivation ga{dq.View(DType::kF8E4M3, {mp, n}), ds.View(DType::kF32, {ns})};
  Status st = SwiGluFp8Forward(ga, dg, du, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return {dq.ToHost(), ds.ToHost()};
}

// Offset 0 takes the row tiles (16-byte aligned rows, I % 8 == 0); offset 4 (8-byte aligned)
// the scalar fallback, which is the original kernel: the same codes and scales, bit for bit.
// Shapes: one row, rows past a row tile with padding, a partial and an odd last group.
TEST(SwiGluFp8Cuda, RowTilesMatchScalarPathBitwise) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 128}, {45, 264}, {70, 136}, {97, 2048}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m << " I=" << n);
    auto gu = RandomBf16(m * 2 * n, 43, -6.f, 6.f);
    auto [tq, ts] = RunOnDevice(gu, m, n, 0);
    auto [fq, fs] = RunOnDevice(gu, m, n, 4);
    EXPECT_EQ(tq, fq);
    EXPECT_EQ(ts, fs);
  }
}

}  // namespace
}  // namespace tandem::kernels
