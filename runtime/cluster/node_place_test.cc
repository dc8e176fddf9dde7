// Where a node sits in the cluster, from flags, Slurm or torchrun-style variables, with
// errors that name the variable at fault.
#include "runtime/cluster/node_place.h"

#include <gtest/gtest.h>

#include <map>

namespace tandem::cluster {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void ExpectError(const Result<NodePlace>& r, const std::string& part) {
  ASSERT_FALSE(r.ok()) << r->ToString();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().ToString();
}

TEST(NodePlaceTest, NothingSetIsOneNode) {
  auto p = ResolveNodePlace({}, Env({}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes, 1);
  EXPECT_EQ(p->node_rank, 0);
  EXPECT_EQ(p->head_port, kDefaultHeadPort);
  EXPECT_TRUE(p->is_head());
}

TEST(NodePlaceTest, FlagsWinOverTheEnvironment) {
  NodeFlags f;
  f.nodes = 3;
  f.node_rank = 2;
  f.head = "10.0.0.5:4000";
  auto p = ResolveNodePlace(f, Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->source, "flags");
  EXPECT_EQ(p->nodes, 3);
  EXPECT_EQ(p->node_rank, 2);
  EXPECT_EQ(p->head_host, "10.0.0.5");
  EXPECT_EQ(p->head_port, 4000);
  f.head = "[fe80::1]:4001";
  p = ResolveNodePlace(f, Env({}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->head_host, "fe80::1");
  EXPECT_EQ(p->head_port, 4001);
}

TEST(NodePlaceTest, BadFlagsAreNamed) {
  NodeFlags f;
  f.nodes = 2;
  f.node_rank = 2;
  f.head = "h:1";
  ExpectError(ResolveNodePlace(f, Env({})), "--node-rank 2");
  f.node_rank = 1;
  f.head = "h:70000";
  ExpectError(ResolveNodePlace(f, Env({})), "--head 'h:70000'");
  f.head = "h";
  ExpectError(ResolveNodePlace(f, Env({})), "HOST:PORT");
  f.head.reset();
  ExpectError(ResolveNodePlace(f, Env({})), "needs --head");
  NodeFlags partial;
  partial.node_rank = 0;
  ExpectError(ResolveNodePlace(partial, Env({})), "go together");
}

TEST(NodePlaceTest, Slurm) {
  auto p = ResolveNodePlace({}, Env({{"SLURM_PROCID", "1"},
                                     {"SLURM_NTASKS", "4"},
                                     {"SLURM_NODELIST", "gpu[07-09,12],cpu5"},
                                     {"MASTER_PORT", "6000"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->source, "slurm");
  EXPECT_EQ(p->node_rank, 1);
  EXPECT_EQ(p->nodes, 4);
  EXPECT_EQ(p->head_host, "gpu07");
  EXPECT_EQ(p->head_port, 6000);
  // TANDEM_HEAD_PORT wins over MASTER_PORT; without a node list, the launch node's address.
  p = ResolveNodePlace({}, Env({{"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "1"},
                                {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"},
                                {"MASTER_PORT", "6000"},
                                {"TANDEM_HEAD_PORT", "7000"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->head_host, "10.1.2.3");
  EXPECT_EQ(p->head_port, 7000);
}

TEST(NodePlaceTest, SlurmErrorsNameTheVariable) {
  ExpectError(ResolveNodePlace({}, Env({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"},
                                        {"SLURM_NODELIST", "a"}})),
              "SLURM_PROCID=2 is not below SLURM_NTASKS=2");
  ExpectError(ResolveNodePlace({}, Env({{"SLURM_PROCID", "x1"}, {"SLURM_NTASKS", "2"}})),
              "SLURM_PROCID='x1' is not an integer");
  ExpectError(ResolveNodePlace({}, Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}})),
              "SLURM_NODELIST");
  ExpectError(ResolveNodePlace({}, Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                        {"SLURM_NODELIST", "gpu[01-03"}})),
              "unbalanced '['");
  ExpectError(ResolveNodePlace({}, Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                        {"SLURM_NODELIST", "a"}, {"TANDEM_HEAD_PORT", "0"}})),
              "TANDEM_HEAD_PORT=0 is out of range");
}

TEST(NodePlaceTest, Torchrun) {
  auto p = ResolveNodePlace({}, Env({{"RANK", "2"}, {"WORLD_SIZE", "3"},
                                     {"MASTER_ADDR", "leader-0.svc"}, {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->source, "torchrun");
  EXPECT_EQ(p->node_rank, 2);
  EXPECT_EQ(p->nodes, 3);
  EXPECT_EQ(p->head_host, "leader-0.svc");
  EXPECT_EQ(p->head_port, 29500);
  ExpectError(ResolveNodePlace({}, Env({{"RANK", "3"}, {"WORLD_SIZE", "3"},
                                        {"MASTER_ADDR", "a"}})),
              "RANK=3 is not below WORLD_SIZE=3");
  ExpectError(ResolveNodePlace({}, Env({{"RANK", "1"}, {"WORLD_SIZE", "3"}})), "MASTER_ADDR");
  ExpectError(ResolveNodePlace({}, Env({{"RANK", "1"}})), "WORLD_SIZE is not set");
  ExpectError(ResolveNodePlace({}, Env({{"RANK", "0"}, {"WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "a"}, {"MASTER_PORT", "65536"}})),
              "MASTER_PORT=65536 is out of range");
  ExpectError(ResolveNodePlace({}, Env({{"RANK", "0"}, {"WORLD_SIZE", "0"}})),
              "WORLD_SIZE=0 is out of range");
}

TEST(NodePlaceTest, SlurmNodeLists) {
  auto hosts = ExpandSlurmNodeList("gpu[01-03,07],cpu5");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu07", "cpu5"}));
  hosts = ExpandSlurmNodeList("r[1-2]-n[8-9]");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"r1-n8", "r1-n9", "r2-n8", "r2-n9"}));
  EXPECT_EQ(*ExpandSlurmNodeList("node1"), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(*ExpandSlurmNodeList("n[098-101]"),
            (std::vector<std::string>{"n098", "n099", "n100", "n101"}));
  EXPECT_FALSE(ExpandSlurmNodeList("n[3-1]").ok());
  EXPECT_FALSE(ExpandSlurmNodeList("n[a-b]").ok());
  EXPECT_FALSE(ExpandSlurmNodeList("n]1[").ok());
  EXPECT_FALSE(ExpandSlurmNodeList("a,,b").ok());
}

}  // namespace
}  // namespace tandem::cluster
