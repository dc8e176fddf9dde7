// CUDA GradNorm / AdamW against the CPU reference over several steps, for sizes that hit
// the float4 path, its scalar tail and the unaligned scalar path; clip and non-finite skip.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/optim/adamw.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::DeviceArray;
using testing::RandomF32;

TensorView F32(std::vector<float>& v) {
  return TensorView(v.data(), DType::kF32, {static_cast<int64_t>(v.size())});
}

// Runs `steps` steps on CPU and GPU on elements [offset, offset + n) of flat buffers.
void RunSteps(int64_t n, int64_t offset, int steps, float max_norm) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
  const int64_t total = n + offset;
  AdamWConfig cfg{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  auto p = RandomF32(total, 1);
  std::vector<float> m(total, 0.f), v(total, 0.f), stats(kGradStatsSize);
  std::vector<bf16> pb(total);
  std::vector<int32_t> step{0};
  DeviceArray<float> dp(p), dm(m), dv(v), dstats(kGradStatsSize), dws(kGradNormWorkspaceSize);
  DeviceArray<bf16> dpb(pb);
  DeviceArray<int32_t> dstep(step);
  auto dview = [&](const DeviceArray<float>& a) {
    return a.View(DType::kF32, {total}).Narrow(0, offset, n);
  };
  for (int t = 0; t < steps; ++t) {
    auto g = RandomF32(total, 50 + t, -2.f, 2.f);
    DeviceArray<float> dg(g);
    TensorView hg = F32(g).Narrow(0, offset, n);
    TensorView hstep(step.data(), DType::kI32, {1});
    ASSERT_TRUE(GradNorm(hg, max_norm, F32(stats), TensorView(), nullptr).ok());
    ASSERT_TRUE(AdamWUpdate(cfg, F32(p).Narrow(0, offset, n), hg, F32(m).Narrow(0, offset, n),
                            F32(v).Narrow(0, offset, n),
                            TensorView(pb.data(), DType::kBF16, {total}).Narrow(0, offset, n),
                            F32(stats), hstep, nullptr).ok());
    ASSERT_TRUE(AdamWFinishStep(F32(stats), hstep, nullptr).ok());

    TensorView gstats = dstats.View(DType::kF32, {kGradStatsSize});
    TensorView gstep = dstep.View(DType::kI32, {1});
    ASSERT_TRUE(GradNorm(dview(dg), max_norm, gstats, dws.View(DType::kF32, {kGradNormWorkspaceSize}),
                         nullptr).ok());
    ASSERT_TRUE(AdamWUpdate(cfg, dview(dp), dview(dg), dview(dm), dview(dv),
                            dpb.View(DType::kBF16, {total}).Narrow(0, offset, n), gstats, gstep,
                            nullptr).ok());
    ASSERT_TRUE(AdamWFinishStep(gstats, gstep, nullptr).ok());
    auto got_stats = dstats.ToHost();
    // fp32 block sums vs a float64 sum: ~sqrt(n) * 2^-24 relative, far below 1e-5.
    EXPECT_NEAR(got_stats[kGradStatsNorm], stats[kGradStatsNorm], 1e-5 * stats[kGradStatsNorm]);
    EXPECT_NEAR(got_stats[kGradStatsClip], stats[kGradStatsClip], 1e-5);
  }
  EXPECT_EQ(dstep.ToHost()[0], steps);
  auto gp = dp.ToHost(), gm = dm.ToHost(), gv = dv.ToHost();
  auto gpb = dpb.ToHost();
  for (int64_t i = 0; i < total; ++i) {
    // Same fp32 formula; differences come from FMA contraction and the clip scale's last
    // bits: a few ulps per step on values of size 1 and steps of size lr = 3e-3.
    ASSERT_NEAR(gp[i], p[i], 2e-6) << i;
    ASSERT_NEAR(gm[i], m[i], 1e-5 * (1 + std::fabs(m[i]))) << i;
    ASSERT_NEAR(gv[i], v[i], 1e-5 * (1 + std::fabs(v[i]))) << i;
    // The bf16 copy may round a master weight that differs in its last bits differently.
    ASSERT_NEAR(gpb[i].f(), pb[i].f(), std::fabs(p[i]) / 128 + 1e-6) << i;
  }
}

TEST(AdamWCuda, MatchesCpuOverSeveralSteps) {
  RunSteps(1, 0, 3, 1.f);
  RunSteps(7, 0, 3, 1.f);
  RunSteps(1000003, 0, 4, 1.f);   // float4 path + 3-element tail, clipped
  RunSteps(4104, 1, 4, 1e9f);     // misaligned by one float: scalar path, no clipping
  RunSteps(129, 4, 3, 0.f);       // clipping off
}

TEST(AdamWCuda, NonFiniteGradsSkipOnDevice) {
  const int64_t n = 4096;
  auto p = RandomF32(n, 7), g = RandomF32(n, 8);
  g[1234] = INFINITY;
  DeviceArray<float> dp(p), dg(g), dm(n), dv(n), dstats(kGradStatsSize),
      dws(kGradNormWorkspaceSize);
  DeviceArray<int32_t> dstep(std::vector<int32_t>{5});
  TensorView stats = dstats.View(DType::kF32, {kGradStatsSize});
  TensorView step = dstep.View(DType::kI32, {1});
  auto v = [&](DeviceArray<float>& a) { return a.View(DType::kF32, {n}); };
  ASSERT_TRUE(GradNorm(v(dg), 1.f, stats, dws.View(DType::kF32, {kGradNormWorkspaceSize}), nullptr).ok());
  ASSERT_TRUE(AdamWUpdate({}, v(dp), v(dg), v(dm), v(dv), TensorView(), stats, step, nullptr).ok());
  ASSERT_TRUE(AdamWFinishStep(stats, step, nullptr).ok());
  EXPECT_EQ(dstats.ToHost()[kGradStatsNonFinite], 1.f);
  EXPECT_EQ(dp.ToHost(), p);
  EXPECT_EQ(dstep.ToHost()[0], 5);
}

}  // namespace
}  // namespace tandem::kernels
