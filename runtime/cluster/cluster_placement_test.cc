// Placement across nodes: replicas spread, pipelines kept on one node when they fit, global
// replica indices, and "does not fit" errors that name the group.
#include "runtime/cluster/cluster_placement.h"

#include <gtest/gtest.h>

namespace tandem::cluster {
namespace {

constexpr char kJob[] = R"(
[channels.hidden]
[channels.other]
[actors.target]
class = "dflash.target"
replicas = 2
gpus = 1
out = "hidden"
[actors.drafter]
class = "dflash.drafter"
replicas = 2
gpus = 1
in = "hidden"
[actors.side]
class = "demo.side"
replicas = 1
cpus = 1
in = "other"
)";

JobSpec Job(const std::string& text) {
  Result<JobSpec> job = ParseJobText(text, "job.toml");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSpec{};
}

std::vector<sched::NodeResources> Nodes(int n, int gpus, int cpus = 8) {
  return std::vector<sched::NodeResources>(n, sched::FakeResources(gpus, cpus));
}

TEST(ClusterPlacementTest, OneNodeIsSchedPlace) {
  auto p = PlaceAcrossNodes(Job(kJob), Nodes(1, 4));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->nodes.size(), 1u);
  EXPECT_EQ(p->ReplicasOn(0, "target"), (std::vector<int>{0, 1}));
  EXPECT_EQ(p->ReplicasOn(0, "drafter"), (std::vector<int>{0, 1}));
  EXPECT_EQ(p->nodes[0].GpusOf("target"), (std::vector<int>{0, 1}));
  EXPECT_EQ(p->nodes[0].GpusOf("drafter"), (std::vector<int>{2, 3}));
}

// Two nodes of 2 GPUs: each runs one target and the drafter it feeds; replica indices stay
// global and GPU indices are the node's own.
TEST(ClusterPlacementTest, TwoNodesKeepPipelinesTogether) {
  auto p = PlaceAcrossNodes(Job(kJob), Nodes(2, 2));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->ReplicasOn(0, "target"), (std::vector<int>{0}));
  EXPECT_EQ(p->ReplicasOn(0, "drafter"), (std::vector<int>{0}));
  EXPECT_EQ(p->ReplicasOn(1, "target"), (std::vector<int>{1}));
  EXPECT_EQ(p->ReplicasOn(1, "drafter"), (std::vector<int>{1}));
  EXPECT_EQ(p->ReplicasOn(0, "side"), (std::vector<int>{0}));
  EXPECT_EQ(p->NodeOf("drafter", 1), 1);
  EXPECT_EQ(p->NodeOf("drafter", 2), -1);
  EXPECT_EQ(p->nodes[1].GpusOf("target"), (std::vector<int>{0}));
  EXPECT_EQ(p->nodes[1].GpusOf("drafter"), (std::vector<int>{1}));
  // Deterministic: the same inputs, the same text.
  EXPECT_EQ(p->ToString(), PlaceAcrossNodes(Job(kJob), Nodes(2, 2))->ToString());
}

// Three nodes, 2 targets + 2 drafters: nodes 0 and 1 run a pipeline each, node 2 is idle.
TEST(ClusterPlacementTest, ThreeNodesSpreadInBlocks) {
  auto p = PlaceAcrossNodes(Job(kJob), Nodes(3, 2));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ReplicasOn(0, "target"), (std::vector<int>{0}));
  EXPECT_EQ(p->ReplicasOn(1, "target"), (std::vector<int>{1}));
  EXPECT_TRUE(p->nodes[2].replicas.empty()) << p->ToString();
  EXPECT_EQ(p->NodeOf("drafter", 0), p->NodeOf("target", 0));
  EXPECT_EQ(p->NodeOf("drafter", 1), p->NodeOf("target", 1));
}

// 5 replicas of 1 GPU over nodes of 2 and 4 GPUs: the even spread (3 + 2) does not fit node
// 0, so first fit places them (2 + 3).
TEST(ClusterPlacementTest, UnevenNodesFallBackToFirstFit) {
  std::vector<sched::GroupRequest> groups = {{"worker", 5, 1.0, 0, 0}};
  std::vector<sched::NodeResources> nodes = {sched::FakeResources(2), sched::FakeResources(4)};
  auto p = PlaceAcrossNodes(groups, {{}}, nodes);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ReplicasOn(0, "worker"), (std::vector<int>{0, 1}));
  EXPECT_EQ(p->ReplicasOn(1, "worker"), (std::vector<int>{2, 3, 4}));
}

// When a pipeline cannot share a node, first fit still puts each drafter beside its target
// when that node has room.
TEST(ClusterPlacementTest, FirstFitPrefersThePartnersNode) {
  std::vector<sched::GroupRequest> groups = {{"target", 2, 1.0, 0, 0}, {"drafter", 2, 0.5, 0, 0}};
  // Node 0 has one GPU, node 1 three: the block spread asks 1.5 GPUs of node 0.
  std::vector<sched::NodeResources> nodes = {sched::FakeResources(1), sched::FakeResources(3)};
  auto p = PlaceAcrossNodes(groups, {{1}, {0}}, nodes);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->NodeOf("target", 0), 0);
  EXPECT_EQ(p->NodeOf("target", 1), 1);
  EXPECT_EQ(p->NodeOf("drafter", 0), 1);  // node 0 is full
  EXPECT_EQ(p->NodeOf("drafter", 1), 1);
}

TEST(ClusterPlacementTest, DoesNotFitNamesTheGroup) {
  auto p = PlaceAcrossNodes(Job(kJob), Nodes(2, 1));
  ASSERT_FALSE(p.ok()) << p->ToString();
  const std::string m = p.status().message();
  EXPECT_NE(m.find("does not fit on 2 node(s)"), std::string::npos) << m;
  EXPECT_NE(m.find("actors.drafter replica"), std::string::npos) << m;
  EXPECT_NE(m.find("node 0:"), std::string::npos) << m;
  EXPECT_NE(m.find("node 1:"), std::string::npos) << m;
  // CPU slots count too.
  std::vector<sched::GroupRequest> cpu = {{"loader", 3, 0, 4, 0}};
  auto q = PlaceAcrossNodes(cpu, {{}}, Nodes(2, 0, 4));
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("actors.loader replica 2"), std::string::npos)
      << q.status().message();
  EXPECT_NE(q.status().message().find("CPU slots"), std::string::npos) << q.status().message();
}

TEST(ClusterPlacementTest, BadRequestIsNamed) {
  std::vector<sched::GroupRequest> groups = {{"odd", 1, 1.5, 0, 0}};
  auto p = PlaceAcrossNodes(groups, {{}}, Nodes(2, 4));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("actors.odd: gpus = 1.5"), std::string::npos)
      << p.status().message();
  EXPECT_FALSE(PlaceAcrossNodes(groups, {{}}, {}).ok());
}

}  // namespace
}  // namespace tandem::cluster
