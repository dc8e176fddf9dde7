// PowerSampler on a real device: while a GEMM loop keeps the GPU busy it takes samples, the
// power is positive and within reach of the board limit, and the SM clock is positive and at
// most the device maximum. A bad device index is an error that names it.
#include "bench/gpu_power.h"

#include <gtest/gtest.h>

#include "bench/bench_util.h"

namespace tandem::bench {
namespace {

TEST(PowerSamplerGpu, SamplesPowerAndClockWhileBusy) {
  auto sampler = PowerSampler::Start(0, 5);
  ASSERT_TRUE(sampler.ok()) << sampler.status().ToString();
  ASSERT_TRUE(GemmCeilingTflops(nullptr).ok());  // ~100 ms of 8192^3 GEMMs
  const PowerSummary s = (*sampler)->Stop();
  EXPECT_GT(s.samples, 3);
  EXPECT_GT(s.limit_watts, 0);
  EXPECT_GT(s.mean_watts, 0);
  EXPECT_LE(s.max_watts, 1.5 * s.limit_watts);  // short spikes above the limit are normal
  EXPECT_GT(s.min_sm_mhz, 0);
  EXPECT_GT(s.max_sm_mhz_supported, 0);
  // A mean of samples all at the maximum clock can exceed it by a rounding error of the sum.
  EXPECT_LE(s.mean_sm_mhz, s.max_sm_mhz_supported * (1 + 1e-9));
  EXPECT_NE(s.ToString().find("W limit"), std::string::npos) << s.ToString();
}

TEST(PowerSamplerGpu, UnknownDeviceIsAnError) {
  auto sampler = PowerSampler::Start(4096);
  ASSERT_FALSE(sampler.ok());
  EXPECT_NE(sampler.status().message().find("cuda:4096"), std::string::npos)
      << sampler.status().ToString();
}

}  // namespace
}  // namespace tandem::bench
