// cuBLASLt GEMM against the CPU reference: odd shapes (1, 7, 129, 1000, 4104), all four
// transposes, bf16/fp32 outputs, bias epilogue, beta accumulation, narrowed views, plan
// cache reuse.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::CompareClose;
using testing::DeviceArray;
using testing::RandomBf16;
using testing::RandomF32;

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  DType out;
  bool bias;
  float beta;
};

void RunCase(GemmContext* ctx, const Case& cs) {
  SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " N=" << cs.n << " K=" << cs.k
                                    << " ta=" << cs.ta << " tb=" << cs.tb
                                    << " out=" << DTypeName(cs.out) << " bias=" << cs.bias
                                    << " beta=" << cs.beta);
  auto a = RandomBf16(cs.m * cs.k, 11);
  auto b = RandomBf16(cs.k * cs.n, 12);
  auto c0 = RandomF32(cs.m * cs.n, 13);
  auto bias = RandomF32(cs.n, 14);
  Shape sa = cs.ta ? Shape{cs.k, cs.m} : Shape{cs.m, cs.k};
  Shape sb = cs.tb ? Shape{cs.n, cs.k} : Shape{cs.k, cs.n};
  const bool out_bf = cs.out == DType::kBF16;
  std::vector<bf16> c_bf(c0.size()), bias_bf(bias.size());
  for (size_t i = 0; i < c0.size(); ++i) c_bf[i] = bf16(c0[i]);
  for (size_t i = 0; i < bias.size(); ++i) bias_bf[i] = bf16(bias[i]);
  std::vector<float> c_f = c0;

  GemmOptions opt;
  opt.trans_a = cs.ta;
  opt.trans_b = cs.tb;
  opt.alpha = 0.75f;
  opt.beta = cs.beta;

  // CPU reference.
  TensorView hc = out_bf ? TensorView(c_bf.data(), cs.out, {cs.m, cs.n})
                         : TensorView(c_f.data(), cs.out, {cs.m, cs.n});
  GemmOptions hopt = opt;
  if (cs.bias)
    hopt.bias = out_bf ? TensorView(bias_bf.data(), cs.out, {cs.n})
                       : TensorView(bias.data(), cs.out, {cs.n});
  DeviceArray<bf16> da(a), db(b), dc_bf(c_bf), dbias_bf(bias_bf);
  DeviceArray<float> dc_f(c_f), dbias_f(bias);
  ASSERT_TRUE(cpu::Gemm(nullptr, TensorView(a.data(), DType::kBF16, sa),
                        TensorView(b.data(), DType::kBF16, sb), hc, hopt, nullptr)
                  .ok());

  TensorView dc = out_bf ? dc_bf.View(cs.out, {cs.m, cs.n}) : dc_f.View(cs.out, {cs.m, cs.n});
  if (cs.bias)
    opt.bias = out_bf ? dbias_bf.View(cs.out, {cs.n}) : dbias_f.View(cs.out, {cs.n});
  Status st = Gemm(ctx, da.View(DType::kBF16, sa), db.View(DType::kBF16, sb), dc, opt, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got_bf = dc_bf.ToHost();
  auto got_f = dc_f.ToHost();
  // Both sides accumulate exact bf16 products in fp32, in different orders: the gap is
  // ~sqrt(K) * 2^-24 * sum|a b| (<= 1e-4 at K=4104, |a|,|b| < 1). A bf16 output may round
  // the two fp32 values to neighbouring bf16s: one ulp, 2^-8 relative.
  double atol = out_bf ? 4e-3 : 2e-4, rtol = out_bf ? 8e-3 : 1e-4;
  auto rep = CompareClose(
      cs.m * cs.n, [&](int64_t i) { return out_bf ? got_bf[i].f() : got_f[i]; },
      [&](int64_t i) { return out_bf ? c_bf[i].f() : c_f[i]; }, atol, rtol);
  EXPECT_TRUE(rep.ok) << rep.ToString();
}

class GemmCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = GemmContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
  }
  std::unique_ptr<GemmContext> ctx_;
};

TEST_F(GemmCuda, MatchesCpuAcrossShapesAndTransposes) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 1, 1}, {7, 7, 7}, {1, 129, 1000}, {129, 7, 1000}, {1000, 129, 7},
      {4104, 7, 129}, {129, 4104, 1}, {64, 1000, 4104}};
  for (auto [m, n, k] : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType out : {DType::kF32, DType::kBF16})
          RunCase(ctx_.get(), {m, n, k, ta, tb, out, false, 0.f});
}

TEST_F(GemmCuda, BiasEpilogueAndAccumulate) {
  for (DType out : {DType::kF32, DType::kBF16}) {
    RunCase(ctx_.get(), {129, 1000, 256, false, true, out, true, 0.f});
    RunCase(ctx_.get(), {7, 129, 33, false, true, out, true, 0.f});
    RunCase(ctx_.get(), {1000, 129, 64, true, false, out, false, 1.f});
    RunCase(ctx_.get(), {33, 100, 1000, true, true, out, true, 0.5f});
  }
}

TEST_F(GemmCuda, PlansAreCachedPerShape) {
  size_t before = ctx_->cached_plans();
  RunCase(ctx_.get(), {64, 96, 128, false, true, DType::kBF16, false, 0.f});
  RunCase(ctx_.get(), {64, 96, 128, false, true, DType::kBF16, false, 0.f});
  EXPECT_EQ(ctx_->cached_plans(), before + 1);
  RunCase(ctx_.get(), {64, 96, 127, false, true, DType::kBF16, false, 0.f});
  EXPECT_EQ(ctx_->cached_plans(), before + 2);
}

TEST_F(GemmCuda, NarrowedViews) {
  // A = left 100 columns of [300, 136]; C = columns 8..8+50 of an fp32 [300, 64] buffer.
  auto a_full = RandomBf16(300 * 136, 21);
  auto b = RandomBf16(100 * 50, 22);
  std::vector<float> c_host(300 * 64, 3.f);
  DeviceArray<bf16> da(a_full), db(b);
  DeviceArray<float> dc(c_host);
  TensorView a_view = da.View(DType::kBF16, {300, 136}).Narrow(1, 0, 100);
  TensorView c_view = dc.View(DType::kF32, {300, 64}).Narrow(1, 8, 50);
  ASSERT_TRUE(Gemm(ctx_.get(), a_view, db.View(DType::kBF16, {100, 50}), c_view, {}, nullptr).ok());
  TensorView ha = TensorView(a_full.data(), DType::kBF16, {300, 136}).Narrow(1, 0, 100);
  TensorView hc = TensorView(c_host.data(), DType::kF32, {300, 64}).Narrow(1, 8, 50);
  ASSERT_TRUE(cpu::Gemm(nullptr, ha, TensorView(b.data(), DType::kBF16, {100, 50}), hc, {}, nullptr).ok());
  auto got = dc.ToHost();
  // Same fp32-accumulation-order argument as above, K = 100; untouched columns stay 3.
  auto rep = CompareClose(300 * 64, [&](int64_t i) { return got[i]; },
                          [&](int64_t i) { return c_host[i]; }, 1e-4, 1e-4);
  EXPECT_TRUE(rep.ok) << rep.ToString();
}

}  // namespace
}  // namespace tandem::kernels
