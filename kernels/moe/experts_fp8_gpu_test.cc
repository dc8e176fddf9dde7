// The CUDA row-wise FP8 expert path (experts_fp8.h) against its CPU twin, the float64
// definition and the bf16 path, on fresh random inputs with odd row counts (an empty expert,
// one expert with every row, every expert the same rows, ragged rows) in both layouts, at
// shapes cuBLASLt's FP8 GEMMs take (H, I multiples of 16, not of 128), and with tokens
// quantized once; each kernel against its CPU twin at row widths that take every register
// variant (1, 2, 4, 8 vectors per lane) and the two-pass one; the strided-batched unscaled
// GEMM against the CPU's; other shapes refused. Skips without an sm_90 GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <span>

#include "kernels/core/stream.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/fp8_raw.h"
#include "kernels/moe/experts_fp8_testing.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

bool HaveFp8Gpu() { return CudaDeviceCount() > 0 && cuda::CheckFp8Device(0).ok(); }

TEST(MoeFp8ExpertsGpuTest, CudaMatchesCpuTwinDefinitionAndBf16) {
  if (!HaveFp8Gpu()) GTEST_SKIP() << "no CUDA device with FP8 tensor cores (sm_90)";
  auto gemm = GemmContext::Create(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const std::vector<std::vector<int32_t>> cases = {
      {0, 3, 3, 23, 24, 41}, {0, 0, 0, 37, 37, 37}, {0, 9, 18, 27, 36, 45},
      {0, 300, 301, 301, 517, 600}};
  uint64_t seed = std::random_device{}();
  for (const auto& offsets : cases)
    for (bool padded : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << (padded ? " padded" : " exact")
                                        << " rows " << offsets.back());
      const testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 272, 80, offsets, seed++);
      const testing::MoeFp8Result gpu =
          testing::RunMoeFp8Experts(testing::Pool(), gemm->get(), p, padded);
      const testing::MoeFp8Result cpu = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p,
                                                                  padded);
      // The same quantizer math: the same weight codes and scales, bit for bit.
      EXPECT_EQ(gpu.gu_codes, cpu.gu_codes);
      EXPECT_EQ(gpu.dn_codes, cpu.dn_codes);
      EXPECT_EQ(gpu.gu_scale, cpu.gu_scale);
      EXPECT_EQ(gpu.dn_scale, cpu.dn_scale);
      // cuBLASLt sums in fp32 in its own order: a raw output can land one bf16 step away,
      // and with it one e4m3 code of act.
      EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu.y), testing::ToDouble(cpu.y), 2e-2,
                                    2e-2, "cuda vs cpu"));
      EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu.y), testing::MoeFp8ExpertsRef(p, gpu),
                                    2e-2, 2e-2, "cuda vs float64"));
      // e4m3's 3 mantissa bits on four operands (x, W_gu, act, W_down): ~2.6% RMS each on
      // uniform data, 0.060-0.065 together on the CPU twin; a wrong scale or layout gives ~1.
      const double err = testing::RelativeL2(gpu.y, testing::MoeBf16Experts(p));
      EXPECT_LT(err, 0.1);
      EXPECT_GT(err, 1e-2);
    }
}

TEST(MoeFp8ExpertsGpuTest, TokensQuantizedOnceMatchTheFusedGather) {
  if (!HaveFp8Gpu()) GTEST_SKIP() << "no CUDA device with FP8 tensor cores (sm_90)";
  auto gemm = GemmContext::Create(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  testing::MoeFp8Problem p =
      testing::RandomMoeFp8Problem(5, 272, 80, {0, 3, 3, 23, 24, 41}, seed);
  testing::RepeatTokens(&p, 13);
  const testing::MoeFp8Result fused =
      testing::RunMoeFp8Experts(testing::Pool(), gemm->get(), p, true);
  const testing::MoeFp8Result once =
      testing::RunMoeFp8Experts(testing::Pool(), gemm->get(), p, true, 13);
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(once.y), testing::ToDouble(fused.y), 0, 0,
                                "tokens once vs fused gather"));
}

// The codes of one row width: CPU twin vs CUDA kernels on the same inputs, over the padded
// layout (E = 3, cap 5: counts 2, 0, 5, so padding rows in two experts) from 7 tokens.
void CheckKernelsAtWidth(int64_t k, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "width " << k << " seed " << seed);
  const int64_t t = 7, e = 3, cap = 5, rows = e * cap;
  const std::vector<int32_t> offsets = {0, 2, 2, 7};
  std::vector<int32_t> gather(rows);
  std::mt19937 rng(seed);
  for (int32_t& g : gather) g = static_cast<int32_t>(rng() % t);
  std::vector<bf16> x = testing::RandomBf16(t * k, seed + 1, -3.f, 3.f);
  std::vector<bf16> raw = testing::RandomBf16(rows * 2 * k, seed + 2, -40.f, 40.f);
  std::vector<float> x_scale(rows), w_scale(e * 2 * k), dn_scale(e * k);
  std::uniform_real_distribution<float> pos(0.01f, 0.2f);
  for (float& v : x_scale) v = pos(rng);
  for (float& v : w_scale) v = pos(rng);
  for (float& v : dn_scale) v = pos(rng);
  std::vector<int32_t> host_offsets = offsets;
  const MoeFp8Rows host_rows{TensorView(host_offsets.data(), DType::kI32, {e + 1}), cap, rows};
  Tensor off_d = testing::ToDevice<int32_t>(offsets, DType::kI32, {e + 1});
  const MoeFp8Rows dev_rows{off_d.view(), cap, rows};
  auto host = [](auto& v, DType dtype, Shape shape) { return TensorView(v.data(), dtype, shape); };

  // Tokens quantized (no layout), then gathered to the padded rows.
  std::vector<uint8_t> tok8(t * k), codes(rows * k), act8(rows * k);
  std::vector<float> tok_s(t), scale(rows), act_s(rows);
  ASSERT_TRUE(cpu::MoeFp8QuantizeRows(host(x, DType::kBF16, {t, k}), {}, {{}, 0, t},
                                      host(tok8, DType::kF8E4M3, {t, k}),
                                      host(tok_s, DType::kF32, {t}), nullptr).ok());
  ASSERT_TRUE(cpu::MoeFp8GatherRows(host(tok8, DType::kF8E4M3, {t, k}),
                                    host(tok_s, DType::kF32, {t}),
                                    host(gather, DType::kI32, {rows}), host_rows,
                                    host(codes, DType::kF8E4M3, {rows, k}),
                                    host(scale, DType::kF32, {rows}), nullptr).ok());
  const std::vector<bf16> y_raw(raw.begin(), raw.begin() + rows * k);  // down's raw products
  std::vector<bf16> y = y_raw;
  ASSERT_TRUE(cpu::MoeFp8SwiGluQuantize(host(raw, DType::kBF16, {rows, 2 * k}),
                                        host(x_scale, DType::kF32, {rows}),
                                        host(w_scale, DType::kF32, {e, 2 * k}), host_rows,
                                        host(act8, DType::kF8E4M3, {rows, k}),
                                        host(act_s, DType::kF32, {rows}), nullptr).ok());
  ASSERT_TRUE(cpu::MoeFp8ScaleRows(host(y, DType::kBF16, {rows, k}),
                                   host(act_s, DType::kF32, {rows}),
                                   host(dn_scale, DType::kF32, {e, k}), host_rows, nullptr)
                  .ok());

  Tensor x_d = testing::ToDevice<bf16>(x, DType::kBF16, {t, k});
  Tensor raw_d = testing::ToDevice<bf16>(raw, DType::kBF16, {rows, 2 * k});
  Tensor y_d = testing::ToDevice<bf16>(y_raw, DType::kBF16, {rows, k});
  Tensor gather_d = testing::ToDevice<int32_t>(gather, DType::kI32, {rows});
  Tensor xs_d = testing::ToDevice<float>(x_scale, DType::kF32, {rows});
  Tensor ws_d = testing::ToDevice<float>(w_scale, DType::kF32, {e, 2 * k});
  Tensor dn_d = testing::ToDevice<float>(dn_scale, DType::kF32, {e, k});
  Tensor act_s_d = testing::ToDevice<float>(act_s, DType::kF32, {rows});  // ScaleRows' input
  const std::vector<uint8_t> poison8(rows * k, 0x7f);
  const std::vector<float> poison(rows, -1.f);
  Tensor tok8_d = testing::ToDevice<uint8_t>(std::span<const uint8_t>(poison8).first(t * k),
                                             DType::kF8E4M3, {t, k});
  Tensor tok_s_d = testing::ToDevice<float>(std::span<const float>(poison).first(t),
                                            DType::kF32, {t});
  Tensor codes_d = testing::ToDevice<uint8_t>(poison8, DType::kF8E4M3, {rows, k});
  Tensor scale_d = testing::ToDevice<float>(poison, DType::kF32, {rows});
  Tensor act8_d = testing::ToDevice<uint8_t>(poison8, DType::kF8E4M3, {rows, k});
  Tensor act_out_d = testing::ToDevice<float>(poison, DType::kF32, {rows});
  Status st = cuda::MoeFp8QuantizeRows(x_d.view(), {}, {{}, 0, t}, tok8_d.view(),
                                       tok_s_d.view(), nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = cuda::MoeFp8GatherRows(tok8_d.view(), tok_s_d.view(), gather_d.view(), dev_rows,
                              codes_d.view(), scale_d.view(), nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = cuda::MoeFp8SwiGluQuantize(raw_d.view(), xs_d.view(), ws_d.view(), dev_rows,
                                  act8_d.view(), act_out_d.view(), nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = cuda::MoeFp8ScaleRows(y_d.view(), act_s_d.view(), dn_d.view(), dev_rows, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // Quantize, gather and rescale: the same float operations in the same order, bit for bit.
  EXPECT_EQ(testing::ToHost<uint8_t>(tok8_d.view()), tok8);
  EXPECT_EQ(testing::ToHost<float>(tok_s_d.view()), tok_s);
  EXPECT_EQ(testing::ToHost<uint8_t>(codes_d.view()), codes);
  EXPECT_EQ(testing::ToHost<float>(scale_d.view()), scale);
  const std::vector<bf16> y_gpu = testing::ToHost<bf16>(y_d.view());
  for (size_t c = 0; c < y.size(); ++c)
    ASSERT_EQ(y_gpu[c].bits, y[c].bits) << "rescaled y at " << c;
  // SwiGLU: CUDA's expf and the C library's exp may differ in the last bit, which can move a
  // row's amax (its scale) by an ulp and a code across a rounding boundary by one step.
  const std::vector<uint8_t> act8_gpu = testing::ToHost<uint8_t>(act8_d.view());
  const std::vector<float> act_s_gpu = testing::ToHost<float>(act_out_d.view());
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_NEAR(act_s_gpu[r], act_s[r], 1e-6 * act_s[r]) << "act scale of row " << r;
  int64_t moved = 0;
  for (size_t c = 0; c < act8.size(); ++c) {
    if (act8_gpu[c] == act8[c]) continue;
    ++moved;
    ASSERT_EQ(act8_gpu[c] & 0x80, act8[c] & 0x80) << "act code " << c;
    ASSERT_LE(std::abs(int(act8_gpu[c] & 0x7f) - int(act8[c] & 0x7f)), 1) << "act code " << c;
  }
  EXPECT_LE(moved, static_cast<int64_t>(act8.size()) / 200);
}

TEST(MoeFp8ExpertsGpuTest, KernelsMatchCpuTwinAtEveryRowWidth) {
  if (!HaveFp8Gpu()) GTEST_SKIP() << "no CUDA device with FP8 tensor cores (sm_90)";
  const uint64_t seed = std::random_device{}();
  // 1, 2, 4 and 8 vectors of 8 columns per lane in registers; 2064 and 4112 take two passes.
  for (int64_t k : {16, 272, 784, 1552, 2048, 2064, 4112}) CheckKernelsAtWidth(k, seed + k);
}

TEST(MoeFp8ExpertsGpuTest, BatchedRawGemmMatchesCpu) {
  if (!HaveFp8Gpu()) GTEST_SKIP() << "no CUDA device with FP8 tensor cores (sm_90)";
  auto gemm = GemmContext::Create(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const int64_t batch = 7, m = 48, n = 96, k = 208;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-448.f, 448.f);
  std::vector<uint8_t> a(batch * m * k), w(batch * n * k);
  for (uint8_t& v : a) v = FloatToE4m3(u(rng));  // finite codes only
  for (uint8_t& v : w) v = FloatToE4m3(u(rng) / 64);
  std::vector<bf16> want(batch * m * n);
  ASSERT_TRUE(cpu::Fp8GemmRaw(nullptr, TensorView(a.data(), DType::kF8E4M3, {batch * m, k}),
                              TensorView(w.data(), DType::kF8E4M3, {batch, n, k}),
                              TensorView(want.data(), DType::kBF16, {batch * m, n}), batch,
                              nullptr)
                  .ok());
  Tensor ad = testing::ToDevice<uint8_t>(a, DType::kF8E4M3, {batch * m, k});
  Tensor wd = testing::ToDevice<uint8_t>(w, DType::kF8E4M3, {batch, n, k});
  Result<Tensor> cd = Tensor::Empty(testing::Pool(), DType::kBF16, {batch * m, n});
  ASSERT_TRUE(cd.ok());
  const Status st = Fp8GemmRaw(gemm->get(), ad.view(), wd.view(), cd->view(), batch, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // fp32 sums in cuBLASLt's order vs float64: one bf16 rounding step (2^-8) apart at most,
  // plus cancellation near zero (sums of +-448^2/64 terms).
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(testing::ToHost<bf16>(cd->view())),
                                testing::ToDouble(want), 64.0, 1.0 / 128, "raw batched gemm"));
}

TEST(MoeFp8ExpertsGpuTest, RefusesWidthsCublasLtCannotTake) {
  if (!HaveFp8Gpu()) GTEST_SKIP() << "no CUDA device with FP8 tensor cores (sm_90)";
  auto gemm = GemmContext::Create(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(2, 200, 72, {0, 3, 5}, 9);
  const Status st = [&]() -> Status {
    const std::vector<bf16> rows(64 * 200, bf16(0.5f));
    Tensor x = testing::ToDevice<bf16>(rows, DType::kBF16, {64, 200});
    ASSIGN_OR_RETURN(Tensor w8, Tensor::Empty(testing::Pool(), DType::kU8,
                                              {MoeFp8ExpertBytes(2, 72, 200)}));
    ASSIGN_OR_RETURN(Tensor ws, Tensor::Empty(testing::Pool(), DType::kU8,
                                              {MoeFp8WorkspaceBytes(5, 200, 72)}));
    ASSIGN_OR_RETURN(Tensor gu, Tensor::Empty(testing::Pool(), DType::kBF16, {64, 144}));
    Tensor off = testing::ToDevice<int32_t>(p.offsets, DType::kI32, {3});
    int64_t o1 = 0, o2 = 0;
    const MoeFp8ExpertWeights w = CarveMoeFp8Experts(w8.data(), &o1, 2, 72, 200, Device::Cuda(0));
    const MoeFp8Workspace work = CarveMoeFp8Workspace(ws.data(), &o2, 5, 200, 72, Device::Cuda(0));
    return MoeFp8ExpertsForward(gemm->get(), w, p.offsets, off.view(), work, x.view(), gu.view(),
                                x.view(), nullptr);
  }();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("multiples of 16"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tandem::kernels
