// Channel links across nodes: groups pinned with `nodes`, the links each node sends and
// receives (the 3-node layout: both targets on node 0, a drafter on each of nodes 1 and 2),
// the producers finished at once where they feed nothing, and the layouts refused by name.
#include "runtime/cluster/channel_links.h"

#include <gtest/gtest.h>

namespace tandem::cluster {
namespace {

JobSpec Job(const std::string& text) {
  Result<JobSpec> job = ParseJobText(text, "job.toml");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSpec{};
}

std::vector<sched::NodeResources> Nodes(int n) {
  return std::vector<sched::NodeResources>(n, sched::FakeResources(0, 8));
}

constexpr char kThreeNodes[] = R"(
[channels.hidden]
capacity = 8
route = "replica"
[actors.target]
class = "dflash.target"
out = "hidden"
nodes = [0]
[actors.target2]
class = "dflash.target"
out = "hidden"
nodes = [0]
[actors.drafter]
class = "dflash.drafter"
replicas = 2
in = "hidden"
nodes = [2, 1]
)";

TEST(ChannelLinksTest, PinnedGroupsRunWhereTheirNodesKeySays) {
  const JobSpec job = Job(kThreeNodes);
  auto p = PlaceAcrossNodes(job, Nodes(3));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ReplicasOn(0, "target"), (std::vector<int>{0}));
  EXPECT_EQ(p->ReplicasOn(0, "target2"), (std::vector<int>{0}));
  EXPECT_EQ(p->ReplicasOn(0, "drafter"), (std::vector<int>{}));
  EXPECT_EQ(p->ReplicasOn(1, "drafter"), (std::vector<int>{0}));
  EXPECT_EQ(p->ReplicasOn(2, "drafter"), (std::vector<int>{1}));
  EXPECT_TRUE(CheckChannelLinks(job, *p).ok());
}

TEST(ChannelLinksTest, ThreeNodesLinkEachTargetToItsDrafter) {
  const JobSpec job = Job(kThreeNodes);
  auto p = PlaceAcrossNodes(job, Nodes(3));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto n0 = PlanChannelLinks(job, *p, 0);
  ASSERT_TRUE(n0.ok()) << n0.status().ToString();
  ASSERT_EQ(n0->outgoing.size(), 2u);
  EXPECT_TRUE(n0->incoming.empty());
  EXPECT_EQ(n0->outgoing[0].Name(), "hidden consumer 0 (node 0 -> node 1)");
  EXPECT_EQ(n0->outgoing[0].producers, (std::vector<int>{0}));
  EXPECT_EQ(n0->outgoing[1].Name(), "hidden consumer 1 (node 0 -> node 2)");
  EXPECT_EQ(n0->outgoing[1].producers, (std::vector<int>{1}));
  EXPECT_TRUE(n0->fed_from_other_nodes.empty());
  EXPECT_TRUE(n0->finished_here.empty());

  auto n2 = PlanChannelLinks(job, *p, 2);
  ASSERT_TRUE(n2.ok()) << n2.status().ToString();
  EXPECT_TRUE(n2->outgoing.empty());
  ASSERT_EQ(n2->incoming.size(), 1u);
  EXPECT_EQ(n2->incoming[0].Name(), "hidden consumer 1 (node 0 -> node 2)");
  EXPECT_EQ(n2->fed_from_other_nodes, (std::set<std::string>{"hidden"}));
  // Target 0 feeds only drafter 0 (node 1): void on node 2 from the start.
  EXPECT_EQ(n2->finished_here.at("hidden"), (std::vector<int>{0}));
}

TEST(ChannelLinksTest, WholePipelinesPerNodeNeedNoLinks) {
  const JobSpec job = Job(R"(
[channels.hidden]
capacity = 8
route = "replica"
[actors.target]
class = "dflash.target"
replicas = 2
out = "hidden"
[actors.drafter]
class = "dflash.drafter"
replicas = 2
in = "hidden"
)");
  auto p = PlaceAcrossNodes(job, Nodes(2));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (int k = 0; k < 2; ++k) {
    auto plan = PlanChannelLinks(job, *p, k);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->outgoing.empty() && plan->incoming.empty()) << k;
    EXPECT_EQ(plan->finished_here.at("hidden"), (std::vector<int>{1 - k}));
  }
}

TEST(ChannelLinksTest, APinOutsideTheClusterIsNamed) {
  auto p = PlaceAcrossNodes(Job(kThreeNodes), Nodes(2));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("actors.drafter.nodes: node 2 is not one of the "
                                      "cluster's 2 nodes"),
            std::string::npos)
      << p.status().ToString();
}

sched::ReplicaAssignment At(const std::string& group, int replica) {
  sched::ReplicaAssignment r;
  r.group = group;
  r.replica = replica;
  return r;
}

// One target replica feeding both drafters on one other node: refused by name.
TEST(ChannelLinksTest, AProducerFeedingTwoConsumersOnOneOtherNodeIsRefused) {
  const JobSpec job = Job(R"(
[channels.hidden]
capacity = 8
route = "replica"
[actors.target]
class = "dflash.target"
out = "hidden"
[actors.drafter]
class = "dflash.drafter"
replicas = 2
in = "hidden"
)");
  ClusterPlacement p;
  p.nodes.resize(2);
  p.nodes[0].replicas = {At("target", 0)};
  p.nodes[1].replicas = {At("drafter", 0), At("drafter", 1)};
  Status st = CheckChannelLinks(job, p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("target/0 on node 0 feeds drafter/0 on node 1 and drafter/1 on "
                              "node 1"),
            std::string::npos)
      << st.ToString();
}

// Node 1 receives target/0's items for drafter/0 and sends target/1's to drafters target/0
// feeds too: refused by name.
TEST(ChannelLinksTest, ReceivingAndForwardingOneProducersItemsIsRefused) {
  const JobSpec job = Job(R"(
[channels.hidden]
capacity = 9
route = "replica"
[actors.target]
class = "dflash.target"
replicas = 2
out = "hidden"
[actors.drafter]
class = "dflash.drafter"
replicas = 3
in = "hidden"
)");
  ClusterPlacement p;
  p.nodes.resize(3);
  p.nodes[0].replicas = {At("target", 0), At("drafter", 1)};
  p.nodes[1].replicas = {At("target", 1), At("drafter", 0)};
  p.nodes[2].replicas = {At("drafter", 2)};
  Status st = CheckChannelLinks(job, p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node 1 receives target/0 on node 0's items"), std::string::npos)
      << st.ToString();
}

TEST(ChannelLinksTest, AnyRouteAcrossNodesIsRefused) {
  const JobSpec job = Job(R"(
[channels.hidden]
capacity = 8
[actors.target]
class = "dflash.target"
out = "hidden"
nodes = [0]
[actors.drafter]
class = "dflash.drafter"
in = "hidden"
nodes = [1]
)");
  auto p = PlaceAcrossNodes(job, Nodes(2));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Status st = CheckChannelLinks(job, *p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("route = \"any\" cannot cross nodes"), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace tandem::cluster
