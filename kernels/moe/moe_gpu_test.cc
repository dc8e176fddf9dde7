// GPU tests of the MoE ops: each CUDA op against its CPU twin on the same inputs (router ids
// and permutation exactly, weights and combine to fp32/bf16 rounding), then MoeLayer on the
// GPU against the CPU MoeLayer and the float64 definition, at odd shapes (experts without
// tokens, one expert taking every token, top-k == expert count) and at the 35B-A3B expert
// shape on a few hundred tokens, on every expert-GEMM path; every path of MoeExperts against
// the CPU loop at odd row counts; the padded layout against its CPU twin.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/gemm/fp8.h"
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

// MoePadLayout on the GPU against the CPU twin, on the CPU permutation of random ids.
void CheckPadLayout(int64_t t, int64_t e, int64_t k, uint64_t seed) {
  std::vector<int32_t> ids(t * k), offsets(e + 1), perm(t * k), rows(t * k);
  const std::vector<float> r = testing::RandomFloats(t * k, seed, 0, 1);
  for (int64_t i = 0; i < t * k; ++i)
    ids[i] = static_cast<int32_t>((static_cast<int64_t>(r[i] * e) + i % k) % e);
  ASSERT_TRUE(cpu::MoePermute(TensorView(offsets.data(), DType::kI32, {e + 1}),
                              TensorView(perm.data(), DType::kI32, {t * k}),
                              TensorView(rows.data(), DType::kI32, {t * k}),
                              TensorView(ids.data(), DType::kI32, {t, k}), nullptr)
                  .ok());
  const int64_t cap = MoeExpertCapacity(offsets) + 16;
  std::vector<int32_t> token(e * cap), row(t * k);
  ASSERT_TRUE(cpu::MoePadLayout(TensorView(token.data(), DType::kI32, {e * cap}),
                                TensorView(row.data(), DType::kI32, {t * k}),
                                TensorView(offsets.data(), DType::kI32, {e + 1}),
                                TensorView(perm.data(), DType::kI32, {t * k}),
                                TensorView(rows.data(), DType::kI32, {t * k}),
                                TensorView(ids.data(), DType::kI32, {t, k}), cap, nullptr)
                  .ok());
  Tensor dtoken = testing::ToDevice(std::vector<int32_t>(e * cap, -7), DType::kI32, {e * cap});
  Tensor drow = testing::ToDevice(std::vector<int32_t>(t * k, -7), DType::kI32, {t * k});
  ASSERT_TRUE(MoePadLayout(dtoken, drow, testing::ToDevice(offsets, DType::kI32, {e + 1}),
                           testing::ToDevice(perm, DType::kI32, {t * k}),
                           testing::ToDevice(rows, DType::kI32, {t * k}),
                           testing::ToDevice(ids, DType::kI32, {t, k}), cap, nullptr)
                  .ok());
  EXPECT_EQ(testing::ToHost<int32_t>(dtoken), token);
  EXPECT_EQ(testing::ToHost<int32_t>(drow), row);
}

TEST(MoeGpuTest, PadLayoutMatchesCpu) {
  CheckPadLayout(777, 256, 8, 41);
  CheckPadLayout(50, 6, 6, 42);   // top-k == expert count
  CheckPadLayout(5, 300, 2, 43);  // most experts idle
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
                   TensorView(gate.data(), DType::kF32, {t}), {}, {}, {}};
  ASSERT_TRUE(cpu::MoeCombine(a, nullptr).ok());
  Tensor dy = testing::ToDevice(y, DType::kBF16, {p, h}), dres = testing::ToDevice(res, DType::kBF16, {t, h});
  Tensor ds = testing::ToDevice(shared, DType::kBF16, {t, h});
  Tensor drows = testing::ToDevice(rows, DType::kI32, {t * k});
  Tensor dw = testing::ToDevice(w, DType::kF32, {t, k}), dg = testing::ToDevice(gate, DType::kF32, {t});
  // out aliases residual, as the targets call it.
  ASSERT_TRUE(MoeCombine({dres, dres, dy, drows, dw, ds, dg, {}, {}, {}}, nullptr).ok());
  // Same fp32 sums in the same order; only a fused multiply-add may differ: one bf16 ulp.
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(dres), want, 1e-6, testing::kOneBf16UlpRtol));
  // The FP8 experts' raw rows: row and expert-channel scales applied on the way in.
  const int64_t e = 7;
  std::vector<int32_t> ids(t * k);
  for (int64_t i = 0; i < t * k; ++i) ids[i] = static_cast<int32_t>((i * 5) % e);
  std::vector<float> row_scale = testing::RandomFloats(p, 11, 0.5f, 2.f),
                     channel = testing::RandomFloats(e * h, 12, 0.1f, 3.f);
  std::vector<bf16> want2(t * h);
  a.out = TensorView(want2.data(), DType::kBF16, {t, h});
  a.row_scale = TensorView(row_scale.data(), DType::kF32, {p});
  a.channel_scale = TensorView(channel.data(), DType::kF32, {e, h});
  a.ids = TensorView(ids.data(), DType::kI32, {t, k});
  ASSERT_TRUE(cpu::MoeCombine(a, nullptr).ok());
  Tensor dres2 = testing::ToDevice(res, DType::kBF16, {t, h});
  Tensor drs = testing::ToDevice(row_scale, DType::kF32, {p});
  Tensor dcs = testing::ToDevice(channel, DType::kF32, {e, h});
  Tensor dids = testing::ToDevice(ids, DType::kI32, {t, k});
  ASSERT_TRUE(MoeCombine({dres2, dres2, dy, drows, dw, ds, dg, drs, dcs, dids}, nullptr).ok());
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(dres2), want2, 1e-6,
                                testing::kOneBf16UlpRtol));
}

void CheckLayer(const MoeLayerShape& s, int64_t tokens, uint64_t seed, int64_t favourite = -1,
                MoeExpertsPath path = MoeExpertsPath::kAuto) {
  SCOPED_TRACE(MoeExpertsPathName(path));
  const testing::MoeProblem p = testing::RandomMoeProblem(s, tokens, seed, favourite);
  std::unique_ptr<GemmContext> gemm = GemmContext::Create(0).value();
  std::vector<int32_t> gpu_ids, cpu_ids;
  const std::vector<bf16> gpu =
      testing::RunMoeLayer(testing::Pool(), gemm.get(), p, &gpu_ids, path);
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

// precision = "fp8": the CUDA layer (cuBLASLt e4m3 GEMMs) against the CPU one and the
// float64 bf16 definition (e4m3's error on the expert outputs: a few %).
void CheckFp8Layer(MoeLayerShape s, int64_t tokens, uint64_t seed, int64_t favourite = -1) {
  s.fp8 = true;
  const testing::MoeProblem p = testing::RandomMoeProblem(s, tokens, seed, favourite);
  std::unique_ptr<GemmContext> gemm = GemmContext::Create(0).value();
  std::vector<int32_t> gpu_ids, cpu_ids;
  const std::vector<bf16> gpu = testing::RunMoeLayer(testing::Pool(), gemm.get(), p, &gpu_ids);
  const std::vector<bf16> cpu = testing::RunMoeLayer(HostAllocator(), nullptr, p, &cpu_ids);
  if (gpu_ids == cpu_ids) {
    EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu), testing::ToDouble(cpu), 3e-2, 1.0 / 64,
                                  "fp8 gpu vs cpu"));
  }
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu), testing::MoeBlockRef(p), 8e-2, 1.0 / 32,
                                "fp8 gpu vs float64"));
}

TEST(MoeGpuTest, Fp8LayerOddShapes) {
  if (!cuda::CheckFp8Device(0).ok()) GTEST_SKIP() << "no FP8 tensor cores (sm_90)";
  CheckFp8Layer({272, 8, 2, 80, 48, true}, 13, 11);    // K not a multiple of 128
  CheckFp8Layer({272, 8, 3, 80, 0, false}, 1, 12);     // one token: most experts empty
  CheckFp8Layer({144, 4, 4, 32, 16, true}, 7, 13);     // top-k = E
  CheckFp8Layer({144, 6, 1, 32, 0, true}, 10, 14, 3);  // one expert takes every token
  CheckFp8Layer({512, 64, 8, 128, 256, true}, 300, 15);  // many experts, ragged rows
}

constexpr MoeExpertsPath kPaths[] = {MoeExpertsPath::kAuto, MoeExpertsPath::kLoop,
                                     MoeExpertsPath::kGrouped, MoeExpertsPath::kPadded};

TEST(MoeGpuTest, LayerOddShapes) {
  for (MoeExpertsPath path : kPaths) {
    CheckLayer({64, 8, 2, 24, 0, true}, 37, 11, -1, path);
    CheckLayer({64, 6, 6, 16, 0, false}, 20, 12, -1, path);    // top-k == expert count
    CheckLayer({64, 6, 1, 16, 0, true}, 40, 13, 2, path);      // one expert takes every token
    CheckLayer({64, 64, 2, 16, 32, true}, 5, 14, -1, path);    // most experts idle; shared
  }
}

// The rule's path (96 tokens leave too few rows per expert for the padded layout: grouped);
// ExpertPathsMatchCpuLoop runs every path at these widths.
TEST(MoeGpuTest, Layer35bA3bExpertShape) { CheckLayer({2048, 256, 8, 512, 512, true}, 96, 15); }

// MoeExperts on `path` against the CPU loop (exact rows) for experts with `counts` rows each;
// y is poisoned with NaN first, so a row no GEMM wrote fails.
void CheckExperts(int64_t h, int64_t i, const std::vector<int32_t>& counts, MoeExpertsPath path,
                  uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << MoeExpertsPathName(path) << " h " << h << " i " << i
                                    << " experts " << counts.size());
  const int64_t e = static_cast<int64_t>(counts.size());
  std::vector<int32_t> offsets = {0};
  for (int32_t c : counts) offsets.push_back(offsets.back() + c);
  const int64_t n = offsets.back(), p = MoePaddedRows(n);
  const float wb = 1.f / std::sqrt(static_cast<float>(h));
  const std::vector<bf16> x = testing::RandomBf16(p * h, seed),
                          gu = testing::RandomBf16(e * 2 * i * h, seed + 1, -wb, wb),
                          down = testing::RandomBf16(e * h * i, seed + 2, -wb, wb);
  std::vector<bf16> cpu_gu(n * 2 * i), cpu_act(n * i), want(n * h);
  const MoeExpertWeights hw{TensorView(const_cast<bf16*>(gu.data()), DType::kBF16, {e, 2 * i, h}),
                            TensorView(const_cast<bf16*>(down.data()), DType::kBF16, {e, h, i})};
  ASSERT_TRUE(MoeExpertsForward(nullptr, hw, offsets,
                                TensorView(const_cast<bf16*>(x.data()), DType::kBF16, {n, h}),
                                TensorView(cpu_gu.data(), DType::kBF16, {n, 2 * i}),
                                TensorView(cpu_act.data(), DType::kBF16, {n, i}),
                                TensorView(want.data(), DType::kBF16, {n, h}), nullptr)
                  .ok());
  Tensor dx = testing::ToDevice(x, DType::kBF16, {p, h});
  Tensor dgu_w = testing::ToDevice(gu, DType::kBF16, {e, 2 * i, h});
  Tensor ddown_w = testing::ToDevice(down, DType::kBF16, {e, h, i});
  Tensor dgu = Tensor::Empty(testing::Pool(), DType::kBF16, {p, 2 * i}).value();
  Tensor dact = Tensor::Empty(testing::Pool(), DType::kBF16, {p, i}).value();
  Tensor dy = testing::ToDevice(std::vector<bf16>(p * h, bf16(std::nanf(""))), DType::kBF16,
                                {p, h});
  std::unique_ptr<GemmContext> gemm = GemmContext::Create(0).value();
  std::unique_ptr<MoeExperts> experts = MoeExperts::Create(testing::Pool(), e, path).value();
  std::vector<bf16> got;
  if (path == MoeExpertsPath::kPadded) {
    // The same rows in the padded layout (cap above the most rows), y poisoned.
    const int64_t cap = MoeExpertCapacity(offsets) + 16;
    std::vector<bf16> px(e * cap * h, bf16(1.f));
    for (int64_t x_e = 0; x_e < e; ++x_e)
      std::copy(x.begin() + offsets[x_e] * h, x.begin() + offsets[x_e + 1] * h,
                px.begin() + x_e * cap * h);
    Tensor pdx = testing::ToDevice(px, DType::kBF16, {e * cap, h});
    Tensor pgu = Tensor::Empty(testing::Pool(), DType::kBF16, {e * cap, 2 * i}).value();
    Tensor pact = Tensor::Empty(testing::Pool(), DType::kBF16, {e * cap, i}).value();
    Tensor pdy = testing::ToDevice(std::vector<bf16>(e * cap * h, bf16(std::nanf(""))),
                                   DType::kBF16, {e * cap, h});
    ASSERT_TRUE(experts->ForwardPadded(gemm.get(), {dgu_w, ddown_w}, offsets, cap, pdx, pgu, pact,
                                       pdy, nullptr)
                    .ok());
    EXPECT_EQ(experts->last_path(), MoeExpertsPath::kPadded);
    const std::vector<bf16> all = testing::ToHost<bf16>(pdy);
    for (int64_t x_e = 0; x_e < e; ++x_e)
      got.insert(got.end(), all.begin() + x_e * cap * h,
                 all.begin() + (x_e * cap + counts[x_e]) * h);
  } else {
    ASSERT_TRUE(experts->Forward(gemm.get(), {dgu_w, ddown_w}, offsets, dx, dgu, dact, dy,
                                 nullptr)
                    .ok());
    MoeExpertsPath want_path = experts->Resolve(offsets);
    if (want_path == MoeExpertsPath::kPadded) want_path = MoeExpertsPath::kGrouped;
    EXPECT_EQ(experts->last_path(), want_path);
    got = testing::ToHost<bf16>(dy);
    got.resize(n * h);
  }
  // Both round gate_up and act to bf16 after fp32 sums in different orders: a rounding flip
  // of an intermediate moves y by about one bf16 ulp of the row's scale.
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(got), testing::ToDouble(want), 2e-2, 2e-2, "y"));
}

TEST(MoeGpuTest, ExpertPathsMatchCpuLoop) {
  for (MoeExpertsPath path : kPaths) {
    CheckExperts(64, 24, {0, 37, 0, 5, 100, 1, 0}, path, 31);    // idle experts, odd counts
    CheckExperts(72, 40, {0, 0, 130, 0}, path, 32);              // one expert takes every row
    CheckExperts(64, 16, {9, 9, 9, 9, 9, 9}, path, 33);          // every expert, equal rows
    CheckExperts(40, 8, {1, 2, 3, 200, 17, 1, 1, 1, 60}, path, 34);  // skewed runs
    CheckExperts(2048, 512, {70, 0, 33, 130, 1, 64, 17, 90}, path, 35);  // 35B-A3B widths
  }
  // Nothing routed: nothing to do, on every path.
  for (MoeExpertsPath path : kPaths) CheckExperts(64, 16, {0, 0, 0}, path, 36);
}

}  // namespace
}  // namespace tandem::kernels
