// CUDA FP8 producers of the hybrid layers (hybrid_ops_fp8.h) against the CPU composition
// (the bf16 op, then QuantizeFp8Activation), codes and scales, on odd shapes: T not a
// multiple of 4 (padding rows), partial 128-column groups, heads straddling groups, strided
// and unaligned views (the scalar paths) and the 27B layer's widths.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/linear_attention/hybrid_ops_fp8.h"
#include "kernels/testing/fp8_testing.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::DeviceArray;
using testing::RandomBf16;

// The bf16 values the quantizer reads may differ from the CPU's by one bf16 ulp (rsqrtf and
// the order of the sums; expf), so scales agree to 2^-7 and codes to one e4m3 step.
constexpr double kScaleRtol = 1.0 / 128;

struct Fp8Pair {  // the CPU's and the GPU's outputs, both filled with junk first
  int64_t mp, k, ns;
  std::vector<uint8_t> hq;
  std::vector<float> hs;
  DeviceArray<uint8_t> dq;
  DeviceArray<float> ds;
  Fp8Pair(int64_t t, int64_t cols)
      : mp(Fp8PaddedRows(t)),
        k(cols),
        ns(Fp8ActScaleElems(t, cols)),
        hq(mp * k, 0xFF),
        hs(ns, -1.f),
        dq(std::vector<uint8_t>(mp * k, 0xFF)),
        ds(std::vector<float>(ns, -1.f)) {}
  Fp8GroupActivation Host() {
    return {TensorView(hq.data(), DType::kF8E4M3, {mp, k}),
            TensorView(hs.data(), DType::kF32, {ns})};
  }
  Fp8GroupActivation Device() const {
    return {dq.View(DType::kF8E4M3, {mp, k}), ds.View(DType::kF32, {ns})};
  }
  std::string Compare() const {
    return testing::CompareFp8Activations(dq.ToHost(), ds.ToHost(), hq, hs, mp, k, kScaleRtol);
  }
};

TEST(GatedRmsNormFp8Cuda, MatchesCpuComposition) {
  // (t, heads, d, column offset of z in rows of cols + 8): d 128 with z offset 8 takes the
  // row-tile kernel (16-byte loads; 7 and 258 tokens: padding rows, a partial tile), offset 5
  // the group kernel's scalar loads, offset 4 its quad loads; other d the row kernel (150
  // columns: a partial group).
  for (const auto& [t, heads, d, z0] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {7, 3, 128, 8}, {130, 48, 128, 5}, {258, 48, 128, 8}, {33, 5, 128, 4}, {5, 3, 50, 8},
           {9, 4, 64, 4}, {3, 1, 256, 8}}) {
    SCOPED_TRACE(::testing::Message() << "t " << t << " heads " << heads << " d " << d);
    const int64_t cols = heads * d, zs = cols + 8;
    auto x = RandomBf16(t * cols, 41, -3.f, 3.f), z = RandomBf16(t * zs, 42, -3.f, 3.f);
    auto w = RandomBf16(d, 43, 0.5f, 1.5f);
    Fp8Pair out(t, cols);
    ASSERT_TRUE(GatedRmsNormFp8Forward(
                    out.Host(), TensorView(x.data(), DType::kBF16, {t, cols}),
                    TensorView(z.data(), DType::kBF16, {t, zs}).Narrow(1, z0, cols),
                    TensorView(w.data(), DType::kBF16, {d}), 1e-6f, nullptr)
                    .ok());
    DeviceArray<bf16> dx(x), dz(z), dw(w);
    const Status st = GatedRmsNormFp8Forward(
        out.Device(), dx.View(DType::kBF16, {t, cols}),
        dz.View(DType::kBF16, {t, zs}).Narrow(1, z0, cols), dw.View(DType::kBF16, {d}), 1e-6f,
        nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out.Compare(), "");
  }
}

TEST(SigmoidGateFp8Cuda, MatchesCpuComposition) {
  // x [t*heads, d], the gate the second half of [t*heads, 2d] rows; out [t, heads*d].
  // d 256 as the 27B attention and 8 (the row-tile kernel), 40 (row tiles; groups straddle
  // heads, a partial group), 50 (scalar; groups straddle heads, partial group), 100 (quads,
  // groups straddle heads).
  for (const auto& [t, heads, d] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 24, 256}, {5, 3, 50}, {13, 2, 100}, {1, 1, 8}, {19, 5, 40}}) {
    SCOPED_TRACE(::testing::Message() << "t " << t << " heads " << heads << " d " << d);
    const int64_t rows = t * heads;
    auto x = RandomBf16(rows * d, 44, -3.f, 3.f), g = RandomBf16(rows * 2 * d, 45, -4.f, 4.f);
    Fp8Pair out(t, heads * d);
    ASSERT_TRUE(SigmoidGateFp8Forward(
                    out.Host(), TensorView(x.data(), DType::kBF16, {rows, d}),
                    TensorView(g.data(), DType::kBF16, {rows, 2 * d}).Narrow(1, d, d), nullptr)
                    .ok());
    DeviceArray<bf16> dx(x), dg(g);
    const Status st = SigmoidGateFp8Forward(
        out.Device(), dx.View(DType::kBF16, {rows, d}),
        dg.View(DType::kBF16, {rows, 2 * d}).Narrow(1, d, d), nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out.Compare(), "");
  }
}

}  // namespace
}  // namespace tandem::kernels
