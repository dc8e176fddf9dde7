// GPU tests of the hybrid layers' small ops: CUDA against the CPU references on odd shapes,
// row-strided views (column blocks of a wider matrix) and packed documents, including a
// single-token document and the 27B layer's widths.
#include <gtest/gtest.h>

#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;
using testing::kOneBf16UlpRtol;
using testing::RandomBf16;
using testing::ToDevice;
using testing::ToHost;

// Shapes: the norms hold a unit as 16-byte vectors in 8 or 16 lanes (d 128, 256), a warp
// (d 1024) or a block (d 5120), or take the scalar path (d 6, unaligned z).
// Both sides compute the same fp32 expression up to the order of the sums and expf/rsqrtf
// rounding, so a bf16 output may land on the neighbouring value: one bf16 ulp.

// [rows, stride] host data and its [rows, cols] block at column `col0`, on the host and the GPU.
struct Block {
  std::vector<bf16> host;
  Tensor dev;
  int64_t rows, stride, cols, col0;
  TensorView h() {
    return TensorView(host.data(), DType::kBF16, {rows, stride}).Narrow(1, col0, cols);
  }
  TensorView d() const { return dev.view().Narrow(1, col0, cols); }
};

Block MakeBlock(int64_t rows, int64_t stride, int64_t cols, int64_t col0, uint64_t seed,
                float lo = -2.f, float hi = 2.f) {
  Block b{RandomBf16(rows * stride, seed, lo, hi), Tensor(), rows, stride, cols, col0};
  b.dev = ToDevice(b.host, DType::kBF16, {rows, stride});
  return b;
}

std::vector<bf16> Cols(const std::vector<bf16>& all, const Block& b) {
  std::vector<bf16> r;
  for (int64_t i = 0; i < b.rows; ++i)
    for (int64_t j = 0; j < b.cols; ++j) r.push_back(all[i * b.stride + b.col0 + j]);
  return r;
}

TEST(HybridOpsGpuTest, CausalConv1dSilu) {
  // (C, K, document lengths, aligned): aligned views (C % 8 == 0, row strides of multiples of
  // 8 elements, 16-byte offsets) take the 16-byte path, the others the scalar one; documents
  // start inside and at the edges of the kernel's 32-token runs; K 6 takes the any-K kernel.
  for (const auto& [c, k, lens, aligned] :
       std::vector<std::tuple<int64_t, int64_t, std::vector<int>, bool>>{
           {5, 4, {1, 2, 7, 3}, false},
           {131, 4, {64, 1, 97}, false},
           {10240, 4, {37, 5}, false},
           {10240, 4, {1, 31, 1, 70, 32, 200}, true},
           {136, 3, {33, 1, 1, 64}, true},
           {24, 2, {5, 40}, true},
           {24, 1, {9}, true},
           {40, 6, {3, 50}, true}}) {
    std::vector<int32_t> cu = {0};
    for (int l : lens) cu.push_back(cu.back() + l);
    const int64_t t = cu.back();
    Block x = aligned ? MakeBlock(t, c + 16, c, 8, 1) : MakeBlock(t, c + 3, c, 2, 1);
    Block out = aligned ? MakeBlock(t, c, c, 0, 2) : MakeBlock(t, c + 1, c, 1, 2);
    std::vector<bf16> w = RandomBf16(c * k, 3);
    Tensor gw = ToDevice(w, DType::kBF16, {c, k});
    Tensor gcu = ToDevice(cu, DType::kI32, {static_cast<int64_t>(cu.size())});
    const TensorView hcu(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
    ASSERT_TRUE(CausalConv1dSiluForward(out.h(), x.h(), TensorView(w.data(), DType::kBF16, {c, k}),
                                        hcu, nullptr)
                    .ok());
    ASSERT_TRUE(CausalConv1dSiluForward(out.d(), x.d(), gw, gcu, nullptr).ok());
    EXPECT_TRUE(AllClose(Cols(ToHost<bf16>(out.dev), out), Cols(out.host, out), 1e-6,
                         kOneBf16UlpRtol, "conv"))
        << "c " << c << " k " << k;
  }
}

TEST(HybridOpsGpuTest, GatedDeltaGates) {
  const int64_t t = 77, h = 48, stride = 6249;
  Block ab = MakeBlock(t, stride, h, 6144, 4, -6.f, 6.f);
  std::vector<bf16> a_log = RandomBf16(h, 5, -3.f, 3.f), dt = RandomBf16(h, 6, -1.f, 2.f);
  std::vector<float> g(t * h), beta(t * h);
  ASSERT_TRUE(
      GatedDeltaGates(TensorView(g.data(), DType::kF32, {t, h}),
                      TensorView(beta.data(), DType::kF32, {t, h}), ab.h(),
                      TensorView(ab.host.data(), DType::kBF16, {t, stride}).Narrow(1, 6192, h),
                      TensorView(a_log.data(), DType::kBF16, {h}),
                      TensorView(dt.data(), DType::kBF16, {h}), nullptr)
          .ok());
  Tensor gg = Tensor::Empty(testing::Pool(), DType::kF32, {t, h}).value();
  Tensor gb = Tensor::Empty(testing::Pool(), DType::kF32, {t, h}).value();
  ASSERT_TRUE(GatedDeltaGates(gg, gb, ab.d(), ab.dev.view().Narrow(1, 6192, h),
                              ToDevice(a_log, DType::kBF16, {h}), ToDevice(dt, DType::kBF16, {h}),
                              nullptr)
                  .ok());
  // expf / log1pf within a few fp32 ulp of the host's.
  EXPECT_TRUE(AllClose(ToHost<float>(gg), g, 1e-6, 1e-5, "g"));
  EXPECT_TRUE(AllClose(ToHost<float>(gb), beta, 1e-6, 1e-5, "beta"));
}

TEST(HybridOpsGpuTest, NormsAndGate) {
  for (const auto& [rows, heads, d] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 3, 6}, {130, 48, 128}, {33, 24, 256}, {5, 3, 1024}, {9, 1, 5120}, {3, 2, 40}}) {
    // z's columns start at 8 (16-byte vectors) when d allows it, else at 5 (scalar loads).
    const int64_t cols = heads * d, z0 = d % 8 == 0 ? 8 : 5;
    Block x = MakeBlock(rows, cols, cols, 0, 7, -3.f, 3.f),
          z = MakeBlock(rows, cols + z0, cols, z0, 8);
    Block out = MakeBlock(rows, cols, cols, 0, 9);
    std::vector<bf16> w = RandomBf16(d, 10, 0.5f, 1.5f);
    const TensorView hw(w.data(), DType::kBF16, {d});
    Tensor gw = ToDevice(w, DType::kBF16, {d});
    ASSERT_TRUE(GatedRmsNormForward(out.h(), x.h(), z.h(), hw, 1e-6f, nullptr).ok());
    ASSERT_TRUE(GatedRmsNormForward(out.d(), x.d(), z.d(), gw, 1e-6f, nullptr).ok());
    EXPECT_TRUE(AllClose(ToHost<bf16>(out.dev), out.host, 1e-6, kOneBf16UlpRtol, "gated norm"));

    // Zero-centred norm on the first d of each [2d] (query | gate) row.
    Block qg = MakeBlock(rows * heads, 2 * d, d, 0, 11, -3.f, 3.f);
    Block q = MakeBlock(rows * heads, d, d, 0, 12);
    ASSERT_TRUE(ZeroCentredRmsNormForward(q.h(), qg.h(), hw, 1e-6f, nullptr).ok());
    ASSERT_TRUE(ZeroCentredRmsNormForward(q.d(), qg.d(), gw, 1e-6f, nullptr).ok());
    EXPECT_TRUE(AllClose(ToHost<bf16>(q.dev), q.host, 1e-6, kOneBf16UlpRtol, "zero-centred"));

    // Sigmoid gate from the second d of each row, in place.
    const TensorView hg =
        TensorView(qg.host.data(), DType::kBF16, {rows * heads, 2 * d}).Narrow(1, d, d);
    ASSERT_TRUE(SigmoidGateForward(q.h(), q.h(), hg, nullptr).ok());
    ASSERT_TRUE(SigmoidGateForward(q.d(), q.d(), qg.dev.view().Narrow(1, d, d), nullptr).ok());
    EXPECT_TRUE(AllClose(ToHost<bf16>(q.dev), q.host, 1e-6, 2 * kOneBf16UlpRtol, "gate"));
  }
}

}  // namespace
}  // namespace tandem::kernels
