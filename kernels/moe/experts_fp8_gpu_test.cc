// The CUDA row-wise FP8 expert path (experts_fp8.h) against its CPU twin, the float64
// definition and the bf16 path, on fresh random inputs with odd row counts (an empty expert,
// one expert with every row, every expert the same rows, ragged rows) in both layouts, at
// shapes cuBLASLt's FP8 GEMMs take (H, I multiples of 16, not of 128); the strided-batched
// unscaled GEMM against the CPU's; other shapes refused. Skips without an sm_90 GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>

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
