// GPU tests of the MoE ops: each CUDA op against its CPU twin on the same inputs (router ids
// and permutation exactly, weights and combine to fp32/bf16 rounding), then MoeLayer on the
// GPU against the CPU MoeLayer and the float64 definition, at odd shapes (experts without
// tokens, one expert taking every token, top-k == expert count) and at the 35B-A3B expert
// shape on a few hundred tokens.
#include <gtest/gtest.h>

#include "kernels/moe/combine.h"
#include "kernels/moe/moe_layer.h"
#include "kernels/moe/moe_testing.h"
#include "kernels/moe/routing.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

void CheckRouting(int64_t t, int64_t e, int64_t k, bool normalize, uint64_t seed) {
  std::vector<float> logits = testing::RandomFloats(t * e, seed, -4, 4);
  for (int64_t r = 0; r < t; r += 3) logits[r * e + e - 1] = logits[r * e];  // ties
  std::vector<int32_t> ids(t * k), offsets(e + 1), perm(t * k), rows(t * k);
  std::vector<float> w(t * k);
  TensorView hl(logits.data(), DType::kF32, {t, e});
  ASSERT_TRUE(cpu::MoeRouterForward(TensorView(ids.data(), DType::kI32, {t, k}),
                                    TensorView(w.data(), DType::kF32, {t, k}), hl, normalize,
                                    nullptr)
                  .ok());
  ASSERT_TRUE(cpu::MoePermute(TensorView(offsets.data(), DType::kI32, {e + 1}),
                              TensorView(perm.data(), DType::kI32, {t * k}),
                              TensorView(rows.data(), DType::kI32, {t * k}),
                              TensorView(ids.data(), DType::kI32, {t, k}), nullptr)
                  .ok());
  Tensor dl = testing::ToDevice(logits, DType::kF32, {t, e});
  Tensor dids = Tensor::Empty(testing::Pool(), DType::kI32, {t, k}).value();
  Tensor dw = Tensor::Empty(testing::Pool(), DType::kF32, {t, k}).value();
  Tensor doff = Tensor::Empty(testing::Pool(), DType::kI32, {e + 1}).value();
  Tensor dperm = Tensor::Empty(testing::Pool(), DType::kI32, {t * k}).value();
  Tensor drows = Tensor::Empty(testing::Pool(), DType::kI32, {t * k}).value();
  ASSERT_TRUE(MoeRouterForward(dids, dw, dl, normalize, nullptr).ok());
  ASSERT_TRUE(MoePermute(doff, dperm, drows, dids, nullptr).ok());
  EXPECT_EQ(testing::ToHost<int32_t>(dids), ids) << t << "x" << e << " k " << k;
  EXPECT_TRUE(testing::AllClose(testing::ToHost<float>(dw), w, 1e-6, 1e-5, "weights"));
  EXPECT_EQ(testing::ToHost<int32_t>(doff), offsets);
  EXPECT_EQ(testing::ToHost<int32_t>(dperm), perm);
  EXPECT_EQ(testing::ToHost<int32_t>(drows), rows);
}

TEST(MoeGpuTest, RouterAndPermutationMatchCpu) {
  CheckRouting(1000, 128, 8, true, 1);   // Qwen3-30B-A3B routing
  CheckRouting(777, 256, 8, true, 2);    // Qwen3.6-35B-A3B routing
  CheckRouting(300, 1024, 32, false, 3); // the limits
  CheckRouting(50, 6, 6, true, 4);       // top-k == expert count
  CheckRouting(5, 300, 2, true, 5);      // most experts get no token
}

TEST(MoeGpuTest, CombineMatchesCpu) {
  const int64_t t = 100, k = 4, h = 2048 + 8, p = 500;
  std::vector<bf16> y = testing::RandomBf16(p * h, 6), res = testing::RandomBf16(t * h, 7),
                    shared = testing::RandomBf16(t * h, 8), want(t * h);
  std::vector<int32_t> rows(t * k);
  for (int64_t i = 0; i < t * k; ++i) rows[i] = static_cast<int32_t>((i * 37) % p);
  std::vector<float> w = testing::RandomFloats(t * k, 9, 0, 1), gate = testing::RandomFloats(t, 10, -3, 3);
  MoeCombineArgs a{TensorView(want.data(), DType::kBF16, {t, h}),
                   TensorView(res.data(), DType::kBF16, {t, h}),
                   TensorView(y.data(), DType::kBF16, {p, h}),
                   TensorView(rows.data(), DType::kI32, {t * k}),
                   TensorView(w.data(), DType::kF32, {t, k}),
                   TensorView(shared.data(), DType::kBF16, {t, h}),
                   TensorView(gate.data(), DType::kF32, {t})};
  ASSERT_TRUE(cpu::MoeCombine(a, nullptr).ok());
  Tensor dy = testing::ToDevice(y, DType::kBF16, {p, h}), dres = testing::ToDevice(res, DType::kBF16, {t, h});
  Tensor ds = testing::ToDevice(shared, DType::kBF16, {t, h});
  Tensor drows = testing::ToDevice(rows, DType::kI32, {t * k});
  Tensor dw = testing::ToDevice(w, DType::kF32, {t, k}), dg = testing::ToDevice(gate, DType::kF32, {t});
  // out aliases residual, as the targets call it.
  ASSERT_TRUE(MoeCombine({dres, dres, dy, drows, dw, ds, dg}, nullptr).ok());
  // Same fp32 sums in the same order; only a fused multiply-add may differ: one bf16 ulp.
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(dres), want, 1e-6, testing::kOneBf16UlpRtol));
}

void CheckLayer(const MoeLayerShape& s, int64_t tokens, uint64_t seed, int64_t favourite = -1) {
  const testing::MoeProblem p = testing::RandomMoeProblem(s, tokens, seed, favourite);
  std::unique_ptr<GemmContext> gemm = GemmContext::Create(0).value();
  std::vector<int32_t> gpu_ids, cpu_ids;
  const std::vector<bf16> gpu = testing::RunMoeLayer(testing::Pool(), gemm.get(), p, &gpu_ids);
  const std::vector<bf16> cpu = testing::RunMoeLayer(HostAllocator(), nullptr, p, &cpu_ids);
  // The router's logits come from cuBLASLt vs the CPU GEMM (fp32 sums in another order), so a
  // near-tie may pick another expert: allow a small share of differing choices.
  int64_t differ = 0;
  for (size_t i = 0; i < gpu_ids.size(); ++i) differ += gpu_ids[i] != cpu_ids[i];
  EXPECT_LE(differ, static_cast<int64_t>(gpu_ids.size()) / 50 + 1);
  if (differ == 0) {
    EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu), testing::ToDouble(cpu), 2e-2, 1.0 / 64,
                                  "gpu vs cpu"));
  }
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu), testing::MoeBlockRef(p), 3e-2, 1.0 / 64,
                                "gpu vs float64"));
}

TEST(MoeGpuTest, LayerOddShapes) {
  CheckLayer({64, 8, 2, 24, 0, true}, 37, 11);
  CheckLayer({64, 6, 6, 16, 0, false}, 20, 12);     // top-k == expert count
  CheckLayer({64, 6, 1, 16, 0, true}, 40, 13, 2);   // one expert takes every token
  CheckLayer({64, 64, 2, 16, 32, true}, 5, 14);     // most experts idle; shared expert
}

TEST(MoeGpuTest, Layer35bA3bExpertShape) {
  CheckLayer({2048, 256, 8, 512, 512, true}, 96, 15);
}

}  // namespace
}  // namespace tandem::kernels
