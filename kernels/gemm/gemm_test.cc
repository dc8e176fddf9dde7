// CPU reference GEMM against a float64 GEMM over odd shapes, all transposes, bias, beta
// accumulation, bf16/fp32 output and strided (narrowed) views.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::CompareClose;
using testing::RandomBf16;
using testing::RandomF32;

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  DType out;
  bool bias;
  float beta;
};

void RunCase(const Case& cs) {
  SCOPED_TRACE(::testing::Message() << "M=" << cs.m << " N=" << cs.n << " K=" << cs.k
                                    << " ta=" << cs.ta << " tb=" << cs.tb
                                    << " out=" << DTypeName(cs.out) << " bias=" << cs.bias
                                    << " beta=" << cs.beta);
  auto a = RandomBf16(cs.m * cs.k, 1);
  auto b = RandomBf16(cs.k * cs.n, 2);
  auto c0 = RandomF32(cs.m * cs.n, 3);
  auto bias = RandomF32(cs.n, 4);
  Shape sa = cs.ta ? Shape{cs.k, cs.m} : Shape{cs.m, cs.k};
  Shape sb = cs.tb ? Shape{cs.n, cs.k} : Shape{cs.k, cs.n};
  std::vector<bf16> c_bf(c0.size()), bias_bf(bias.size());
  for (size_t i = 0; i < c0.size(); ++i) c_bf[i] = bf16(c0[i]);
  for (size_t i = 0; i < bias.size(); ++i) bias_bf[i] = bf16(bias[i]);
  std::vector<float> c_f = c0;
  const bool out_bf = cs.out == DType::kBF16;
  TensorView c = out_bf ? TensorView(c_bf.data(), cs.out, {cs.m, cs.n})
                        : TensorView(c_f.data(), cs.out, {cs.m, cs.n});
  GemmOptions opt;
  opt.trans_a = cs.ta;
  opt.trans_b = cs.tb;
  opt.alpha = 0.75f;
  opt.beta = cs.beta;
  if (cs.bias)
    opt.bias = out_bf ? TensorView(bias_bf.data(), cs.out, {cs.n})
                      : TensorView(bias.data(), cs.out, {cs.n});
  ASSERT_TRUE(Gemm(nullptr, TensorView(a.data(), DType::kBF16, sa),
                   TensorView(b.data(), DType::kBF16, sb), c, opt, nullptr)
                  .ok());

  std::vector<double> da(a.size()), db(b.size()), dc(c0.size());
  for (size_t i = 0; i < a.size(); ++i) da[i] = a[i].f();
  for (size_t i = 0; i < b.size(); ++i) db[i] = b[i].f();
  for (size_t i = 0; i < dc.size(); ++i) dc[i] = out_bf ? bf16(c0[i]).f() : c0[i];  // C's input
  cpu::GemmF64(cs.m, cs.n, cs.k, da.data(), cs.ta, db.data(), cs.tb, dc.data(), 0.75, cs.beta);
  if (cs.bias)
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j)
        dc[i * cs.n + j] += out_bf ? bias_bf[j].f() : bias[j];
  // Inputs are exact in both; fp32 accumulation over K terms of size <= 1 errs by at most
  // ~K * 2^-24 * K (<< 1e-3 here). A bf16 output adds one rounding: 2^-8 relative, plus an
  // absolute floor for results near zero.
  double atol = out_bf ? 2e-3 : 1e-4, rtol = out_bf ? 8e-3 : 1e-5;
  auto rep = CompareClose(
      cs.m * cs.n, [&](int64_t i) { return out_bf ? c_bf[i].f() : c_f[i]; },
      [&](int64_t i) { return dc[i]; }, atol, rtol);
  EXPECT_TRUE(rep.ok) << rep.ToString();
}

TEST(GemmCpu, MatchesFloat64AcrossShapesAndTransposes) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 1, 1}, {7, 5, 3}, {1, 7, 129}, {33, 17, 129}, {64, 129, 7}, {5, 1000, 9}};
  for (auto [m, n, k] : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType out : {DType::kF32, DType::kBF16})
          RunCase({m, n, k, ta, tb, out, false, 0.f});
}

TEST(GemmCpu, BiasAndAccumulate) {
  for (DType out : {DType::kF32, DType::kBF16}) {
    RunCase({13, 21, 17, false, true, out, true, 0.f});
    RunCase({13, 21, 17, true, false, out, false, 1.f});
    RunCase({9, 31, 40, true, true, out, true, 0.5f});
  }
}

TEST(GemmCpu, NarrowedViewsUseRowStride) {
  // A is the left 5 columns of an [8, 12] buffer; C is columns 3..9 of an [8, 16] buffer.
  auto a_full = RandomBf16(8 * 12, 5);
  auto b = RandomBf16(5 * 6, 6);
  std::vector<float> c_full(8 * 16, -7.f);
  TensorView a = TensorView(a_full.data(), DType::kBF16, {8, 12}).Narrow(1, 0, 5);
  TensorView c = TensorView(c_full.data(), DType::kF32, {8, 16}).Narrow(1, 3, 6);
  ASSERT_TRUE(Gemm(nullptr, a, TensorView(b.data(), DType::kBF16, {5, 6}), c, {}, nullptr).ok());
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j < 16; ++j) {
      if (j < 3 || j >= 9) {
        EXPECT_EQ(c_full[i * 16 + j], -7.f) << "wrote outside the view at " << i << "," << j;
        continue;
      }
      double want = 0;
      for (int64_t p = 0; p < 5; ++p) want += a_full[i * 12 + p].f() * b[p * 6 + (j - 3)].f();
      EXPECT_NEAR(c_full[i * 16 + j], want, 1e-5);
    }
  }
}

TEST(GemmCpu, RejectsMismatchedShapes) {
  std::vector<bf16> a(6), b(6);
  std::vector<float> c(9);
  Status st = Gemm(nullptr, TensorView(a.data(), DType::kBF16, {3, 2}),
                   TensorView(b.data(), DType::kBF16, {3, 2}),
                   TensorView(c.data(), DType::kF32, {3, 3}), {}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("inner dims"), std::string::npos) << st.ToString();
  GemmOptions opt;
  opt.trans_b = true;
  EXPECT_TRUE(Gemm(nullptr, TensorView(a.data(), DType::kBF16, {3, 2}),
                   TensorView(b.data(), DType::kBF16, {3, 2}),
                   TensorView(c.data(), DType::kF32, {3, 3}), opt, nullptr)
                  .ok());
}

}  // namespace
}  // namespace tandem::kernels
