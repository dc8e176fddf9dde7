#include "runtime/sched/placement.h"

#include <gtest/gtest.h>

namespace tandem::sched {
namespace {

GroupRequest Group(std::string name, int replicas, double gpus, double cpus = 0,
                   uint64_t pinned = 0) {
  return GroupRequest{std::move(name), replicas, gpus, cpus, pinned};
}

TEST(PlacementTest, SeedsTopologyOnEightGpus) {
  Result<Placement> p =
      Place(FakeResources(8), {Group("target", 5, 1), Group("drafter", 3, 1)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->GpusOf("target"), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p->GpusOf("drafter"), (std::vector<int>{5, 6, 7}));
  ASSERT_EQ(p->replicas.size(), 8u);
  EXPECT_EQ(p->replicas[5].group, "drafter");
  EXPECT_EQ(p->replicas[5].replica, 0);
  EXPECT_EQ(p->replicas[5].gpu_share, 1);
}

TEST(PlacementTest, TooManyGpusNamesGroupsAndNode) {
  Result<Placement> p =
      Place(FakeResources(1), {Group("target", 5, 1), Group("drafter", 3, 1)});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(),
            "job asks 8 GPUs (target: 5×1, drafter: 3×1), this node has 1");
}

TEST(PlacementTest, CpuAndPinnedLimits) {
  NodeResources node = FakeResources(0, /*cpu_slots=*/2, /*pinned_bytes=*/1 << 20);
  Result<Placement> p = Place(node, {Group("data", 3, 0, 1)});
  EXPECT_EQ(p.status().message(), "job asks 3 CPU slots (data: 3×1), this node has 2");
  p = Place(node, {Group("store", 2, 0, 0, 1 << 20)});
  EXPECT_EQ(p.status().message(),
            "job asks 2.0 MiB of pinned memory (store: 2×1.0 MiB), this node has 1.0 MiB");
  p = Place(node, {Group("data", 2, 0, 1, 1 << 19)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->GpusOf("data").empty());
}

TEST(PlacementTest, HalfGpusColocate) {
  Result<Placement> p = Place(FakeResources(1), {Group("a", 1, 0.5), Group("b", 1, 0.5)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->GpusOf("a"), std::vector<int>{0});
  EXPECT_EQ(p->GpusOf("b"), std::vector<int>{0});
  EXPECT_DOUBLE_EQ(p->replicas[0].gpu_share, 0.5);
  // With a second GPU free, the halves still share gpu 0 (packing keeps whole GPUs free).
  p = Place(FakeResources(2), {Group("a", 1, 0.5), Group("b", 1, 0.5)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->GpusOf("b"), std::vector<int>{0});
  // A third half does not fit on one GPU.
  p = Place(FakeResources(1), {Group("a", 2, 0.5), Group("b", 1, 0.5)});
  EXPECT_EQ(p.status().message(), "job asks 1.5 GPUs (a: 2×0.5, b: 1×0.5), this node has 1");
}

TEST(PlacementTest, SharesPackBestFitAroundWholeGpus) {
  // Whole GPUs first (gpu 0), then the 0.6 share (largest first) on gpu 1, and the two 0.2
  // shares on the fullest GPU that still has room (gpu 1), leaving gpu 2 free.
  Result<Placement> p = Place(FakeResources(3), {Group("small", 2, 0.2), Group("whole", 1, 1),
                                                 Group("big", 1, 0.6)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->GpusOf("whole"), std::vector<int>{0});
  EXPECT_EQ(p->GpusOf("big"), std::vector<int>{1});
  EXPECT_EQ(p->GpusOf("small"), (std::vector<int>{1, 1}));
  // Thirds add up exactly.
  p = Place(FakeResources(1), {Group("third", 3, 1.0 / 3)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
}

TEST(PlacementTest, SharesThatCannotPackSayWhy) {
  // 3 × 0.6 = 1.8 GPUs fits the total of 2, but only one 0.6 fits per GPU.
  Result<Placement> p = Place(FakeResources(2), {Group("big", 3, 0.6)});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "cannot pack the job's GPU shares: actors.big replica 2 needs 0.6 of a GPU, but the "
            "free shares are gpu0 0.4, gpu1 0.4; use shares that add up to whole GPUs or add "
            "GPUs");
}

TEST(PlacementTest, MultiGpuReplicasAndBadRequests) {
  Result<Placement> p = Place(FakeResources(4), {Group("tp", 2, 2)});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->replicas[1].gpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(p->GpusOf("tp"), (std::vector<int>{0, 2}));
  EXPECT_FALSE(Place(FakeResources(4), {Group("x", 1, 1.5)}).ok());
  EXPECT_FALSE(Place(FakeResources(4), {Group("x", 0, 1)}).ok());
  EXPECT_FALSE(Place(FakeResources(4), {Group("x", 1, -1)}).ok());
  EXPECT_FALSE(Place(FakeResources(4), {Group("x", 1, 1), Group("x", 1, 1)}).ok());
}

TEST(PlacementTest, GroupRequestFromJobSection) {
  ConfigValue s = ConfigValue::MakeTable();
  s.set_location("job.toml:12");
  s.Set("class", "dflash.drafter");
  s.Set("replicas", 3);
  s.Set("gpus", 1);
  s.Set("pinned_bytes", 4096);
  Result<GroupRequest> g = GroupRequestFromConfig("drafter", s);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->replicas, 3);
  EXPECT_EQ(g->gpus, 1.0);
  EXPECT_EQ(g->pinned_bytes, 4096u);
  s.Set("gpus", "all");
  EXPECT_EQ(GroupRequestFromConfig("drafter", s).status().message(),
            "job.toml:12: key 'gpus': expected a number, got a string");
  s.Set("gpus", 0.5);
  EXPECT_DOUBLE_EQ(GroupRequestFromConfig("drafter", s)->gpus, 0.5);
}

}  // namespace
}  // namespace tandem::sched
