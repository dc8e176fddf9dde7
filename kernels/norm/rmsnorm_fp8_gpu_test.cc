// CUDA RMSNorm -> e4m3 against the CPU composition (the norm, then QuantizeFp8Activation),
// with weight offsets 0 and 1, on odd shapes: M not a multiple of 4 (padding rows), H with a
// partial 128-column group, and the Qwen3 / Qwen3.5 widths; and the fast path against the
// fallback (the same x shifted off 16-byte alignment), bit for bit.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kernels/norm/rmsnorm_fp8.h"
#include "kernels/testing/fp8_testing.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::DeviceArray;
using testing::RandomBf16;

// Weight offset 0 (Qwen3's norm) and 1 (Qwen3.5's zero-centred `1 + w`, w near 0).
TEST(RmsNormFp8Cuda, MatchesCpuComposition) {
  for (auto [m, h] : {std::pair<int64_t, int64_t>{1, 128}, {13, 300}, {7, 130}, {11, 1160},
                      {259, 4096}, {9, 5120}, {5, 9000}})
    for (float offset : {0.f, 1.f}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " H=" << h << " offset=" << offset);
      auto x = RandomBf16(m * h, 31, -3.f, 3.f);
      auto w = offset == 0.f ? RandomBf16(h, 32, 0.5f, 1.5f) : RandomBf16(h, 32, -0.1f, 0.1f);
      const int64_t mp = Fp8PaddedRows(m), ns = Fp8ActScaleElems(mp, h);
      std::vector<uint8_t> hq(mp * h, 0xFF);
      std::vector<float> hs(ns, -1.f);
      Fp8GroupActivation ha{TensorView(hq.data(), DType::kF8E4M3, {mp, h}),
                            TensorView(hs.data(), DType::kF32, {ns})};
      ASSERT_TRUE(cpu::RmsNormFp8Forward(ha, TensorView(x.data(), DType::kBF16, {m, h}),
                                         TensorView(w.data(), DType::kBF16, {h}), 1e-6f, nullptr,
                                         offset)
                      .ok());
      DeviceArray<bf16> dx(x), dw(w);
      DeviceArray<uint8_t> dq(std::vector<uint8_t>(mp * h, 0xFF));
      DeviceArray<float> ds(std::vector<float>(ns, -1.f));
      Fp8GroupActivation ga{dq.View(DType::kF8E4M3, {mp, h}), ds.View(DType::kF32, {ns})};
      Status st = RmsNormFp8Forward(ga, dx.View(DType::kBF16, {m, h}), dw.View(DType::kBF16, {h}),
                                    1e-6f, nullptr, offset);
      ASSERT_TRUE(st.ok()) << st.ToString();
      // rstd differs by fp32 reduction order (and rsqrtf): the bf16 inputs of the quantizer
      // may differ by one bf16 ulp, so scales agree to 2^-7 and codes to one e4m3 step.
      EXPECT_EQ(testing::CompareFp8Activations(dq.ToHost(), ds.ToHost(), hq, hs, mp, h, 1.0 / 128),
                "");
    }
}

// The GPU op on x placed `offset` elements into a device buffer; returns codes and scales.
std::pair<std::vector<uint8_t>, std::vector<float>> RunOnDevice(const std::vector<bf16>& x,
                                                                const std::vector<bf16>& w,
                                                                int64_t m, int64_t h,
                                                                int64_t offset, float w_offset) {
  std::vector<bf16> shifted(offset, bf16(0.f));
  shifted.insert(shifted.end(), x.begin(), x.end());
  DeviceArray<bf16> dx(shifted), dw(w);
  const int64_t mp = Fp8PaddedRows(m), ns = Fp8ActScaleElems(mp, h);
  DeviceArray<uint8_t> dq(std::vector<uint8_t>(mp * h, 0xFF));
  DeviceArray<float> ds(std::vector<float>(ns, -1.f));
  Fp8GroupActivation ga{dq.View(DType::kF8E4M3, {mp, h}), ds.View(DType::kF32, {ns})};
  Status st = RmsNormFp8Forward(
      ga, TensorView(dx.get() + offset, DType::kBF16, {m, h}, Device::Cuda(0)),
      dw.View(DType::kBF16, {h}), 1e-6f, nullptr, w_offset);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return {dq.ToHost(), ds.ToHost()};
}

// Offset 0 takes the fast path (16-byte aligned rows, H % 8 == 0, H <= 8192: two rows per
// block, a half-warp per group); offset 4 (8-byte aligned) the one-row fallback. Both add the
// squares in the same order, so codes and scales agree bit for bit. Shapes: one row, an odd
// row count (a block of one real and one padding row), a partial last group, every slot count.
TEST(RmsNormFp8Cuda, FastPathMatchesFallbackBitwise) {
  for (auto [m, h] : {std::pair<int64_t, int64_t>{1, 128}, {11, 1160}, {37, 3072}, {9, 5120},
                      {6, 8192}})
    for (float offset : {0.f, 1.f}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " H=" << h << " offset=" << offset);
      auto x = RandomBf16(m * h, 33, -3.f, 3.f);
      auto w = offset == 0.f ? RandomBf16(h, 34, 0.5f, 1.5f) : RandomBf16(h, 34, -0.1f, 0.1f);
      auto [fq, fs] = RunOnDevice(x, w, m, h, 0, offset);
      auto [sq, ss] = RunOnDevice(x, w, m, h, 4, offset);
      EXPECT_EQ(fq, sq);
      EXPECT_EQ(fs, ss);
    }
}

}  // namespace
}  // namespace tandem::kernels
