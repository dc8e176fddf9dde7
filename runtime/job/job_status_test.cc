// BottleneckVerdict on synthetic job pictures: the channel verdict, and the shared-GPU one
// (gpu_verdict.h) that must win when a target and a drafter share a GPU, where host waits
// and event-timed stages point at the wrong side.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/job/gpu_verdict.h"
#include "runtime/job/job_status.h"

namespace tandem {
namespace {

ActorStatus Actor(const std::string& group, int replica, int gpu, const std::string& cls) {
  ActorStatus a;
  a.name = group + "/" + std::to_string(replica);
  a.group = group;
  a.replica = replica;
  a.gpu = gpu;
  a.class_name = cls;
  return a;
}

StageStatus Stage(const std::string& name, double total_s, double seconds) {
  StageStatus s;
  s.name = name;
  s.count = 100;
  s.total_s = total_s;
  s.percent_of_wall = 100 * total_s / seconds;
  return s;
}

// The colocated job of examples/qwen3-8b-1gpu.toml after 100 s: one target and one drafter
// on GPU 0. The target's event-timed forward also counts the drafter's interleaved kernels
// (target.forward near 100% of wall), and the drafter's host loop, which queues steps ahead
// of its GPU, waits on the channel most of the time.
JobStatus Colocated(double target_busy, double drafter_busy) {
  JobStatus j;
  j.seconds = 100;
  j.actors = {Actor("target", 0, 0, "dflash.target"), Actor("drafter", 0, 0, "dflash.drafter")};
  ChannelStatus c;
  c.name = "hidden";
  c.capacity = 2;
  c.writers = 1;
  c.readers = 1;
  c.pop_wait_s = 70;  // misleading: the host pops early and queues the step
  c.push_wait_s = 5;
  j.channels = {c};
  j.stages = {Stage("target.forward", 98, 100), Stage("drafter.queue_get", 70, 100),
              Stage("drafter.forward_backward", 3, 100),
              Stage("target.gpu.forward", 100 * target_busy, 100),
              Stage("drafter.gpu.step", 100 * drafter_busy, 100)};
  return j;
}

TEST(BottleneckVerdictTest, ChannelVerdictWithoutGpuStages) {
  JobStatus j = Colocated(0, 0);
  j.stages.resize(3);  // no GPU-busy stages: the host picture is all there is
  const std::string v = BottleneckVerdict(j);
  EXPECT_NE(v.find("consumers wait on producers: 70%"), std::string::npos) << v;
  EXPECT_NE(v.find("largest stage target.forward"), std::string::npos) << v;
}

TEST(BottleneckVerdictTest, SharedGpuDrafterBounds) {
  // Dense anchors: the drafter's GPU work never pauses, the target's idles 38% (blocked on
  // the full channel or the store), though the host picture says the drafter waits.
  const std::string v = BottleneckVerdict(Colocated(0.62, 0.99));
  EXPECT_EQ(v.rfind("GPU 0 is shared by drafter and target (stream busy, overlapping: drafter "
                    "99%, target 62%): the drafter bounds: its GPU work never waits, the "
                    "target's idles 38% of the time waiting on it", 0),
            0u) << v;
  EXPECT_EQ(v.find("consumers wait"), std::string::npos) << v;
  // The stage note leaves the overlapping GPU-busy stages out.
  EXPECT_EQ(v.find("largest stage drafter.gpu"), std::string::npos) << v;
}

TEST(BottleneckVerdictTest, SharedGpuTargetBounds) {
  const std::string v = BottleneckVerdict(Colocated(0.97, 0.45));
  EXPECT_NE(v.find("the target bounds: its GPU work never waits, the drafter's idles 55%"),
            std::string::npos)
      << v;
}

TEST(BottleneckVerdictTest, SharedGpuBothBusy) {
  const std::string v = BottleneckVerdict(Colocated(0.95, 0.9));
  EXPECT_NE(v.find("the GPU bounds the job"), std::string::npos) << v;
}

TEST(BottleneckVerdictTest, UnsaturatedOrUnsharedGpuFallsBackToChannels) {
  // Neither side keeps the GPU busy: something else bounds; the channels tell.
  std::string v = BottleneckVerdict(Colocated(0.5, 0.3));
  EXPECT_NE(v.find("consumers wait on producers"), std::string::npos) << v;
  // Busy streams on different GPUs are not a shared GPU.
  JobStatus j = Colocated(0.62, 0.99);
  j.actors[1].gpu = 1;
  v = BottleneckVerdict(j);
  EXPECT_NE(v.find("consumers wait on producers"), std::string::npos) << v;
}

TEST(BottleneckVerdictTest, SharesAreReplicaMeansAndClassesNameSides) {
  // Two targets and two drafters, one of each per GPU; groups named unlike the prefixes,
  // found by class. 360 s of drafter GPU time over 2 replicas x 200 s = 90%.
  JobStatus j;
  j.seconds = 200;
  j.actors = {Actor("t", 0, 0, "dflash.target"), Actor("t", 1, 1, "dflash.target"),
              Actor("d", 0, 0, "dflash.drafter"), Actor("d", 1, 1, "dflash.drafter")};
  j.stages = {Stage("target.gpu.forward", 200, 200), Stage("drafter.gpu.step", 360, 200),
              Stage("drafter.h2d", 10, 200)};
  const std::vector<GpuSideShare> s = GpuSharesOn(j, 1);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].prefix, "drafter");
  EXPECT_EQ(s[0].replicas, 2);
  EXPECT_DOUBLE_EQ(s[0].busy, 0.9);
  EXPECT_EQ(s[1].prefix, "target");
  EXPECT_DOUBLE_EQ(s[1].busy, 0.5);
  EXPECT_NE(BottleneckVerdict(j).find("GPU 0 is shared by drafter and target"),
            std::string::npos);
  EXPECT_TRUE(IsGpuBusyStage("drafter.gpu.step"));
  EXPECT_FALSE(IsGpuBusyStage("drafter.h2d"));
  EXPECT_FALSE(IsGpuBusyStage("gpu.step"));
}

}  // namespace
}  // namespace tandem
