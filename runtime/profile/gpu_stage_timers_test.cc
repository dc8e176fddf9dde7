// GPU tests of GpuStageTimers (label gpu; skipped without a device). A spin kernel that
// busy-waits on the GPU's global nanosecond timer gives a stage of known length.
#include "runtime/profile/gpu_stage_timers.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include <gtest/gtest.h>

#include "runtime/core/clock.h"
#include "runtime/testing/gpu_spin_kernel.h"

namespace tandem {
namespace {

constexpr int64_t kMs = 1'000'000;

class GpuStageTimersTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess); }
  void TearDown() override {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }
  void Spin(int64_t ns) {
    ASSERT_EQ(tandem::testing::LaunchSpin(static_cast<uint64_t>(ns), stream_), cudaSuccess);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(GpuStageTimersTest, MeasuresSpinKernelLength) {
  ProfileStats prof;
  auto timers = GpuStageTimers::Create(&prof, 8);
  ASSERT_TRUE(timers.ok()) << timers.status().ToString();
  StageHandle stage = prof.Stage("gpu.spin");
  Spin(kMs);  // warm-up launch, not timed
  for (int i = 0; i < 3; ++i) {
    auto t = (*timers)->Scope(stage, stream_);
    Spin(20 * kMs);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);  // the test waits; the timers never do
  ProfileSnapshot s = prof.RollWindow();  // the pre-roll hook resolves the pairs
  ASSERT_EQ(s.stages.size(), 1u);
  const StageStats& w = s.stages[0].window;
  EXPECT_EQ(w.count, 3u);
  // The kernel runs >= 20 ms by its own clock; the events add launch and scheduling gaps of
  // microseconds, and event timing resolves ~0.5 us: 19.9..21 ms leaves room for both.
  EXPECT_GE(w.p50_ns, 19.9 * kMs);
  EXPECT_LE(w.max_ns, 21 * kMs);
  EXPECT_EQ((*timers)->pending(), 0u);
  EXPECT_EQ((*timers)->errors(), 0u) << (*timers)->last_error().ToString();
}

TEST_F(GpuStageTimersTest, HotPathNeverWaitsForTheGpu) {
  ProfileStats prof;
  auto timers = GpuStageTimers::Create(&prof, 2);
  ASSERT_TRUE(timers.ok());
  StageHandle slow = prof.Stage("gpu.slow");
  StageHandle fast = prof.Stage("gpu.fast");
  const TimePoint t0 = SteadyClock::now();
  {
    auto t = (*timers)->Scope(slow, stream_);
    Spin(300 * kMs);
  }
  { auto t = (*timers)->Scope(fast, stream_); }
  auto dropped = (*timers)->Scope(fast, stream_);  // both pairs pending: not timed
  EXPECT_FALSE(dropped.timed());
  dropped.End();
  EXPECT_EQ((*timers)->Poll(), 0) << "nothing has finished yet";
  const double host_s = SecondsSince(t0);
  // Four scopes and a poll are microseconds of host work; a hidden synchronize would take
  // the kernel's 300 ms. 50 ms separates the two with room for a loaded host.
  EXPECT_LT(host_s, 0.050);
  EXPECT_EQ((*timers)->pending(), 2u);
  EXPECT_EQ((*timers)->dropped(), 1u);

  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ((*timers)->Poll(), 2);
  ProfileSnapshot s = prof.RollWindow();
  ASSERT_EQ(s.stages[0].name, "gpu.slow");
  EXPECT_EQ(s.stages[0].window.count, 1u);
  EXPECT_GE(s.stages[0].window.max_ns, 299 * kMs);
  EXPECT_EQ(s.stages[1].window.count, 1u);
  EXPECT_LT(s.stages[1].window.max_ns, 1 * kMs);
  // A freed pair is reused: the next scope is timed again.
  EXPECT_TRUE((*timers)->Scope(fast, stream_).timed());
}

}  // namespace
}  // namespace tandem
