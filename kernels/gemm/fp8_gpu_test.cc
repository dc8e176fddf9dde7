// CUDA block-scaled FP8 against the CPU references: quantizers byte-exact (same IEEE math),
// dequantize exact, and the cuBLASLt FP8 GEMM against the reference GEMM on odd shapes
// (M not a multiple of 128 or of 4, partial K and N blocks, the residual accumulate).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/gemm/fp8.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::CompareClose;
using testing::DeviceArray;

std::vector<float> Randn(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(g) * scale;
  return v;
}

std::vector<bf16> ToBf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16(v[i]);
  return out;
}

class Fp8Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::CheckFp8Device(0).ok()) GTEST_SKIP() << "device 0 has no FP8 tensor cores";
    auto ctx = GemmContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
  }
  std::unique_ptr<GemmContext> ctx_;
};

TEST_F(Fp8Cuda, WeightQuantizeAndDequantizeMatchCpuExactly) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{130, 300}, {256, 4096}, {1, 16}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << n << " K=" << k);
    std::vector<float> w = Randn(n * k, 5, 0.03f);
    for (int64_t i = 0; i < n * k; i += 101) w[i] *= 1e4f;  // saturating outliers
    std::vector<bf16> wb = ToBf16(w);
    const int64_t nb = Fp8Blocks(n), ld = Fp8WeightScaleLd(k);
    std::vector<uint8_t> hq(n * k);
    std::vector<float> hs(nb * ld, -1.f);
    Fp8BlockWeight hw{TensorView(hq.data(), DType::kF8E4M3, {n, k}),
                      TensorView(hs.data(), DType::kF32, {nb, ld})};
    ASSERT_TRUE(cpu::QuantizeFp8Weight(TensorView(wb.data(), DType::kBF16, {n, k}), hw, nullptr).ok());
    DeviceArray<bf16> dw(wb);
    DeviceArray<uint8_t> dq(n * k);
    DeviceArray<float> ds(std::vector<float>(nb * ld, -1.f));
    Fp8BlockWeight gw{dq.View(DType::kF8E4M3, {n, k}), ds.View(DType::kF32, {nb, ld})};
    Status st = QuantizeFp8Weight(dw.View(DType::kBF16, {n, k}), gw, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(dq.ToHost(), hq);
    EXPECT_EQ(ds.ToHost(), hs);
    std::vector<float> href(n * k);
    ASSERT_TRUE(cpu::DequantizeFp8Weight(hw, TensorView(href.data(), DType::kF32, {n, k}), nullptr).ok());
    DeviceArray<float> dout(n * k);
    ASSERT_TRUE(DequantizeFp8Weight(gw, dout.View(DType::kF32, {n, k}), nullptr).ok());
    EXPECT_EQ(dout.ToHost(), href);
  }
}

TEST_F(Fp8Cuda, TransposeMatchesCpuExactly) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{130, 300}, {33, 4100}, {1, 16}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << n << " K=" << k);
    std::vector<float> w = Randn(n * k, 23, 0.03f);
    const int64_t nb = Fp8Blocks(n), ld = Fp8WeightScaleLd(k);
    const int64_t kb = Fp8Blocks(k), ldt = Fp8WeightScaleLd(n);
    std::vector<uint8_t> hq(n * k), hqt(k * n);
    std::vector<float> hs(nb * ld), hst(kb * ldt, -1.f);
    Fp8BlockWeight hw{TensorView(hq.data(), DType::kF8E4M3, {n, k}),
                      TensorView(hs.data(), DType::kF32, {nb, ld})};
    Fp8BlockWeight hwt{TensorView(hqt.data(), DType::kF8E4M3, {k, n}),
                       TensorView(hst.data(), DType::kF32, {kb, ldt})};
    ASSERT_TRUE(cpu::QuantizeFp8Weight(TensorView(w.data(), DType::kF32, {n, k}), hw, nullptr).ok());
    ASSERT_TRUE(cpu::TransposeFp8Weight(hw, hwt, nullptr).ok());
    DeviceArray<uint8_t> dq(hq), dqt(std::vector<uint8_t>(k * n, 0xAB));
    DeviceArray<float> ds(hs), dst(std::vector<float>(kb * ldt, -1.f));
    Fp8BlockWeight gw{dq.View(DType::kF8E4M3, {n, k}), ds.View(DType::kF32, {nb, ld})};
    Fp8BlockWeight gwt{dqt.View(DType::kF8E4M3, {k, n}), dst.View(DType::kF32, {kb, ldt})};
    Status st = TransposeFp8Weight(gw, gwt, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(dqt.ToHost(), hqt);
    EXPECT_EQ(dst.ToHost(), hst);
  }
}

TEST_F(Fp8Cuda, ActivationQuantizeMatchesCpuExactly) {
  // K % 8 == 0 takes the row tiles (32 rows x two groups per block): 259 and 70 rows end in
  // a partial tile with padding rows, K = 264 / 136 in a partial (and odd) last group.
  for (auto [m, k] : {std::pair<int64_t, int64_t>{13, 300}, {1, 128}, {259, 4096}, {70, 264},
                      {45, 136}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m << " K=" << k);
    std::vector<bf16> x = ToBf16(Randn(m * k, 9, 3.f));
    const int64_t mp = Fp8PaddedRows(m), ns = Fp8ActScaleElems(mp, k);
    std::vector<uint8_t> hq(mp * k, 0xFF);
    std::vector<float> hs(ns, -1.f);
    Fp8GroupActivation ha{TensorView(hq.data(), DType::kF8E4M3, {mp, k}),
                          TensorView(hs.data(), DType::kF32, {ns})};
    ASSERT_TRUE(cpu::QuantizeFp8Activation(TensorView(x.data(), DType::kBF16, {m, k}), ha, nullptr).ok());
    DeviceArray<bf16> dx(x);
    DeviceArray<uint8_t> dq(std::vector<uint8_t>(mp * k, 0xFF));
    DeviceArray<float> ds(std::vector<float>(ns, -1.f));
    Fp8GroupActivation ga{dq.View(DType::kF8E4M3, {mp, k}), ds.View(DType::kF32, {ns})};
    Status st = QuantizeFp8Activation(dx.View(DType::kBF16, {m, k}), ga, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(dq.ToHost(), hq);
    EXPECT_EQ(ds.ToHost(), hs);
  }
}

struct GemmCase {
  int64_t m, n, k;
  float beta;
};

void RunGemm(GemmContext* ctx, const GemmCase& cs) {
  SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " N=" << cs.n << " K=" << cs.k
                                    << " beta=" << cs.beta);
  const int64_t mp = Fp8PaddedRows(cs.m), n = cs.n, k = cs.k, ns = Fp8ActScaleElems(mp, k);
  std::vector<float> x = Randn(cs.m * k, 21), w = Randn(n * k, 22, 0.05f), c0 = Randn(mp * n, 23);
  // Per-row and per-block magnitudes differ so a misread scale layout cannot pass.
  for (int64_t r = 0; r < cs.m; ++r)
    for (int64_t c = 0; c < k; ++c) x[r * k + c] *= std::ldexp(1.f, static_cast<int>((r % 5) - (c / 128) % 3));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w[r * k + c] *= std::ldexp(1.f, static_cast<int>((r / 128) % 3 - (c / 128) % 2));
  std::vector<bf16> xb = ToBf16(x), wb = ToBf16(w), cb = ToBf16(c0);
  const int64_t nb = Fp8Blocks(n), ld = Fp8WeightScaleLd(k);
  // CPU: quantize both, reference GEMM.
  std::vector<uint8_t> hxq(mp * k), hwq(n * k);
  std::vector<float> hxs(ns), hws(nb * ld);
  Fp8GroupActivation ha{TensorView(hxq.data(), DType::kF8E4M3, {mp, k}), TensorView(hxs.data(), DType::kF32, {ns})};
  Fp8BlockWeight hw{TensorView(hwq.data(), DType::kF8E4M3, {n, k}), TensorView(hws.data(), DType::kF32, {nb, ld})};
  ASSERT_TRUE(cpu::QuantizeFp8Activation(TensorView(xb.data(), DType::kBF16, {cs.m, k}), ha, nullptr).ok());
  ASSERT_TRUE(cpu::QuantizeFp8Weight(TensorView(wb.data(), DType::kBF16, {n, k}), hw, nullptr).ok());
  std::vector<bf16> ref = cb;
  GemmOptions opt;
  opt.trans_b = true;
  opt.beta = cs.beta;
  ASSERT_TRUE(cpu::Fp8Gemm(nullptr, ha, hw, TensorView(ref.data(), DType::kBF16, {mp, n}), opt, nullptr).ok());
  // GPU: quantize on the device, cuBLASLt GEMM.
  DeviceArray<bf16> dx(xb), dw(wb), dc(cb);
  DeviceArray<uint8_t> dxq(mp * k), dwq(n * k);
  DeviceArray<float> dxs(ns), dws(nb * ld);
  Fp8GroupActivation ga{dxq.View(DType::kF8E4M3, {mp, k}), dxs.View(DType::kF32, {ns})};
  Fp8BlockWeight gw{dwq.View(DType::kF8E4M3, {n, k}), dws.View(DType::kF32, {nb, ld})};
  ASSERT_TRUE(QuantizeFp8Activation(dx.View(DType::kBF16, {cs.m, k}), ga, nullptr).ok());
  ASSERT_TRUE(QuantizeFp8Weight(dw.View(DType::kBF16, {n, k}), gw, nullptr).ok());
  Status st = Fp8Gemm(ctx, ga, gw, dc.View(DType::kBF16, {mp, n}), opt, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got = dc.ToHost();
  // Same codes and scales on both sides. The GPU accumulates each 128-wide K block on the
  // FP8 tensor cores (about 14 significant bits before the fp32 promotion at the block's
  // end) and both sides round to bf16 (2^-8 relative): so 1% of the output's RMS absolute
  // plus one bf16 ulp relative. A misread scale layout moves outputs by factors of 2.
  double ss = 0;
  for (const bf16& v : ref) ss += double(v.f()) * v.f();
  const double rms = std::sqrt(ss / static_cast<double>(ref.size()));
  auto rep = CompareClose(mp * n, [&](int64_t i) { return got[i].f(); },
                          [&](int64_t i) { return ref[i].f(); }, 1e-2 * rms, 8e-3);
  EXPECT_TRUE(rep.ok) << rep.ToString();
}

TEST_F(Fp8Cuda, GemmMatchesReferenceOnOddShapes) {
  const std::vector<GemmCase> cases = {{1, 128, 128, 0.f},    {259, 384, 640, 0.f},
                                       {131, 256, 256, 1.f},  {1000, 4112, 1024, 0.f},
                                       {130, 144, 1152, 1.f}, {64, 96, 4096, 0.f}};
  for (const GemmCase& cs : cases) RunGemm(ctx_.get(), cs);
}

TEST_F(Fp8Cuda, GemmWithPartialKBlock) {
  // K = 272: the last 128-column group holds 16 columns.
  RunGemm(ctx_.get(), {131, 256, 272, 0.f});
}

TEST_F(Fp8Cuda, GemmRejectsShapesCublasCannotRun) {
  DeviceArray<uint8_t> q(8 * 136), wq(32 * 136);
  DeviceArray<float> s(8 * 4), ws(4);
  DeviceArray<bf16> c(8 * 32);
  Fp8GroupActivation a{q.View(DType::kF8E4M3, {8, 136}), s.View(DType::kF32, {8 * 2})};
  Fp8BlockWeight w{wq.View(DType::kF8E4M3, {32, 136}), ws.View(DType::kF32, {1, 4})};
  GemmOptions opt;
  opt.trans_b = true;
  Status st = Fp8Gemm(ctx_.get(), a, w, c.View(DType::kBF16, {8, 32}), opt, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("multiples of 16"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
