// Decoding control-plane messages: honest messages round-trip, and a hostile payload cannot
// make the decoder do work out of proportion to its size.
#include "runtime/control/messages.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tandem {
namespace {

TEST(MessagesTest, ResponseWithManyActorsRoundTrips) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kJobs;
  JobStatus j;
  j.id = "j1";
  j.name = "tiny";
  j.actors.resize(2000);
  for (size_t i = 0; i < j.actors.size(); ++i) j.actors[i].name = "a" + std::to_string(i);
  r.jobs.push_back(j);
  const std::string frame = EncodeResponse(r);
  auto back = DecodeResponse(frame.substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->jobs.size(), 1u);
  ASSERT_EQ(back->jobs[0].actors.size(), 2000u);
  EXPECT_EQ(back->jobs[0].actors[1999].name, "a1999");
}

// `tandem status` against a daemon or a running `tandem run` carries the drafter's last
// evaluation (its tau by speculative decoding) across the wire.
TEST(MessagesTest, TrainingEvalRoundTrips) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kJobs;
  JobStatus j;
  j.training.active = true;
  j.training.tau = 1.5;
  j.training.eval = {true, 200, 3.25, 410.5, 8, {0.9, 0.5, 0.25}, 150, 3.5};
  j.training.selector = {true, 0.5, 0.875, 0.625};
  r.jobs.push_back(j);
  auto back = DecodeResponse(EncodeResponse(r).substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->jobs.size(), 1u);
  const EvalStatus& e = back->jobs[0].training.eval;
  EXPECT_TRUE(e.active);
  EXPECT_EQ(e.step, 200);
  EXPECT_DOUBLE_EQ(e.tau, 3.25);
  EXPECT_DOUBLE_EQ(e.tok_s, 410.5);
  EXPECT_EQ(e.prompts, 8);
  EXPECT_EQ(e.accept_rate, (std::vector<double>{0.9, 0.5, 0.25}));
  EXPECT_EQ(e.best_step, 150);
  EXPECT_DOUBLE_EQ(e.best_tau, 3.5);
  EXPECT_DOUBLE_EQ(back->jobs[0].training.tau, 1.5);
  const SelectorMetrics& s = back->jobs[0].training.selector;
  EXPECT_TRUE(s.active);
  EXPECT_DOUBLE_EQ(s.loss, 0.5);
  EXPECT_DOUBLE_EQ(s.recall, 0.875);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.625);
}

// The head's `tandem status` of a job on several nodes carries every node's health and parts;
// a status of one process says node -1.
TEST(MessagesTest, NodeStatusesRoundTrip) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kJobs;
  JobStatus one;
  r.jobs.push_back(one);
  JobStatus j;
  j.node = 0;
  NodeStatus n;
  n.rank = 1;
  n.host = "gpu-b";
  n.state = "lost";
  n.heartbeat_age_s = 12.5;
  n.step = 40;
  n.report_age_s = 13;
  n.actors.emplace_back().name = "drafter/1";
  n.actors[0].stage = "drafter.allreduce";
  n.channels.emplace_back().name = "hidden";
  n.channels[0].depth = 3;
  n.store.used = 4096;
  j.nodes.emplace_back().host = "gpu-a";
  j.nodes.push_back(n);
  r.jobs.push_back(j);
  auto back = DecodeResponse(EncodeResponse(r).substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->jobs.size(), 2u);
  EXPECT_EQ(back->jobs[0].node, -1);
  EXPECT_TRUE(back->jobs[0].nodes.empty());
  const JobStatus& b = back->jobs[1];
  EXPECT_EQ(b.node, 0);
  ASSERT_EQ(b.nodes.size(), 2u);
  EXPECT_EQ(b.nodes[0].host, "gpu-a");
  const NodeStatus& m = b.nodes[1];
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.host, "gpu-b");
  EXPECT_EQ(m.state, "lost");
  EXPECT_DOUBLE_EQ(m.heartbeat_age_s, 12.5);
  EXPECT_EQ(m.step, 40);
  EXPECT_DOUBLE_EQ(m.report_age_s, 13);
  ASSERT_EQ(m.actors.size(), 1u);
  EXPECT_EQ(m.actors[0].name, "drafter/1");
  EXPECT_EQ(m.actors[0].stage, "drafter.allreduce");
  ASSERT_EQ(m.channels.size(), 1u);
  EXPECT_EQ(m.channels[0].depth, 3u);
  EXPECT_EQ(m.store.used, 4096u);
}

// A cluster join carries the node's inventory and identity; every field survives the wire.
TEST(MessagesTest, ClusterJoinRoundTrips) {
  ControlRequest req;
  req.kind = ControlRequest::Kind::kClusterJoin;
  req.cluster.node_rank = 2;
  req.cluster.host = "gpu03";
  req.cluster.nonce = "n-1";
  req.cluster.job_hash = "abc123";
  req.cluster.version = "0.1.0-5-gdeadbee";
  req.cluster.inventory = sched::FakeResources(2, 16, 5ull << 30, 80ull << 30);
  req.cluster.wait_ms = 1500;
  auto back = DecodeRequest(EncodeRequest(req).substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kind, ControlRequest::Kind::kClusterJoin);
  const ClusterRequest& c = back->cluster;
  EXPECT_EQ(c.node_rank, 2);
  EXPECT_EQ(c.host, "gpu03");
  EXPECT_EQ(c.nonce, "n-1");
  EXPECT_EQ(c.job_hash, "abc123");
  EXPECT_EQ(c.version, "0.1.0-5-gdeadbee");
  ASSERT_EQ(c.inventory.gpus.size(), 2u);
  EXPECT_EQ(c.inventory.gpus[1].index, 1);
  EXPECT_EQ(c.inventory.gpus[1].memory_bytes, 80ull << 30);
  EXPECT_TRUE(c.inventory.gpus[1].fake);
  EXPECT_EQ(c.inventory.cpu_slots, 16);
  EXPECT_EQ(c.inventory.pinned_bytes, 5ull << 30);
  EXPECT_EQ(c.wait_ms, 1500u);
}

// Key-value requests carry arbitrary bytes (NCCL unique ids hold zeros).
TEST(MessagesTest, KvAndBarrierRoundTrip) {
  const std::string bytes("\0\x01\xff id", 6);
  for (auto kind : {ControlRequest::Kind::kKvPut, ControlRequest::Kind::kKvGet,
                    ControlRequest::Kind::kBarrier, ControlRequest::Kind::kClusterHeartbeat,
                    ControlRequest::Kind::kClusterLeave}) {
    ControlRequest req;
    req.kind = kind;
    req.cluster.node_rank = 1;
    req.cluster.key = "nccl/drafter";
    req.cluster.value = bytes;
    req.cluster.count = 3;
    req.cluster.step = 41;
    req.cluster.failure = "out of memory";
    auto back = DecodeRequest(EncodeRequest(req).substr(kFrameHeaderBytes));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->kind, kind);
    EXPECT_EQ(back->cluster.key, "nccl/drafter");
    EXPECT_EQ(back->cluster.value, bytes);
    EXPECT_EQ(back->cluster.count, 3);
    EXPECT_EQ(back->cluster.step, 41);
    EXPECT_EQ(back->cluster.failure, "out of memory");
  }
}

// The head's answer to a join: the placement of every node, with global replica indices.
TEST(MessagesTest, ClusterReplyRoundTrips) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kCluster;
  r.cluster.ready = true;
  r.cluster.value = std::string("\0v", 2);
  r.cluster.failure = "node 2 (gpu03) not heard from";
  r.cluster.hosts = {"gpu01", "gpu02"};
  r.cluster.placement.resize(2);
  r.cluster.placement[1].replicas.push_back({"drafter", 3, {0, 1}, 1.0, 2.0, 4096});
  auto back = DecodeResponse(EncodeResponse(r).substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->kind, ControlResponse::Kind::kCluster);
  const ClusterReply& c = back->cluster;
  EXPECT_TRUE(c.ready);
  EXPECT_EQ(c.value, std::string("\0v", 2));
  EXPECT_EQ(c.failure, "node 2 (gpu03) not heard from");
  EXPECT_EQ(c.hosts, (std::vector<std::string>{"gpu01", "gpu02"}));
  ASSERT_EQ(c.placement.size(), 2u);
  EXPECT_TRUE(c.placement[0].replicas.empty());
  ASSERT_EQ(c.placement[1].replicas.size(), 1u);
  const sched::ReplicaAssignment& a = c.placement[1].replicas[0];
  EXPECT_EQ(a.group, "drafter");
  EXPECT_EQ(a.replica, 3);
  EXPECT_EQ(a.gpus, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(a.cpus, 2.0);
  EXPECT_EQ(a.pinned_bytes, 4096u);
}

long MaxRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Found by control_frame_fuzz: 192 bytes whose jobs[0].actors list claims ~2 million
// all-default elements. With a traversal limit sized for the largest frame the decoder built
// them all (seconds of CPU, ~800 MB) before failing; it must be refused before that work, so
// the process's peak memory barely moves.
TEST(MessagesTest, SmallPayloadClaimingHugeListIsRefused) {
  std::ifstream f(std::string(TANDEM_SOURCE_DIR) +
                      "/runtime/control/testdata/response_list_amplification.bin",
                  std::ios::binary);
  ASSERT_TRUE(f) << "testdata missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string payload = ss.str();
  ASSERT_EQ(payload.size(), 192u);
  const long rss0 = MaxRssKb();
  auto r = DecodeResponse(payload);
  EXPECT_LT(MaxRssKb() - rss0, 100 * 1024) << "KiB of peak memory grown decoding 192 bytes";
  ASSERT_FALSE(r.ok()) << "decoded " << r->jobs.size() << " jobs";
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
}

}  // namespace
}  // namespace tandem
