// The CUDA FP8 expert path (experts_fp8.h) against its CPU version and the float64
// definition, on odd row counts (an empty expert, one expert with every row, every expert
// the same rows) at shapes cuBLASLt's FP8 GEMMs take (H, I multiples of 16, not of 128).
#include <gtest/gtest.h>

#include <memory>

#include "kernels/core/stream.h"
#include "kernels/gemm/fp8.h"
#include "kernels/moe/experts_fp8_testing.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

TEST(MoeFp8ExpertsGpuTest, CudaMatchesCpuAndDefinition) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  if (!cuda::CheckFp8Device(0).ok()) GTEST_SKIP() << "no FP8 tensor cores (sm_90)";
  auto gemm = GemmContext::Create(0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const std::vector<std::vector<int32_t>> cases = {
      {0, 3, 3, 23, 24, 41}, {0, 0, 0, 37, 37, 37}, {0, 9, 18, 27, 36, 45},
      {0, 300, 301, 301, 517, 600}};
  for (const auto& offsets : cases) {
    testing::MoeFp8Problem p = testing::RandomMoeFp8Problem(5, 272, 80, offsets, 41);
    const testing::MoeFp8Result gpu = testing::RunMoeFp8Experts(testing::Pool(), gemm->get(), p);
    const testing::MoeFp8Result cpu = testing::RunMoeFp8Experts(HostAllocator(), nullptr, p);
    EXPECT_EQ(gpu.gu_codes, cpu.gu_codes);
    EXPECT_EQ(gpu.dn_codes, cpu.dn_codes);
    // cuBLASLt accumulates in fp32 in its own order: a bf16 unit of gate_up or act can move,
    // and with it one e4m3 code.
    EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu.y), testing::ToDouble(cpu.y), 2e-2, 2e-2,
                                  "cuda vs cpu"));
    EXPECT_TRUE(testing::AllClose(testing::ToDouble(gpu.y), testing::MoeFp8ExpertsRef(p, gpu),
                                  2e-2, 2e-2, "cuda vs float64"));
  }
}

}  // namespace
}  // namespace tandem::kernels
