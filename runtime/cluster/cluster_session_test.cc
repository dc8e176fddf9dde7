// Two nodes' sessions in one process over 127.0.0.1: rank 0 starts the head, both join and
// get their share of a parsed job, and both finish cleanly.
#include "runtime/cluster/cluster_session.h"

#include <gtest/gtest.h>

#include <future>

namespace tandem::cluster {
namespace {

constexpr char kJob[] = R"(
[channels.hidden]
[actors.target]
class = "dflash.target"
replicas = 2
cpus = 1
out = "hidden"
[actors.drafter]
class = "dflash.drafter"
replicas = 2
cpus = 1
in = "hidden"
)";

ClusterConfig Config(const JobSpec* job, int rank, int port) {
  ClusterConfig c;
  c.place = {rank, 2, "127.0.0.1", port, "flags"};
  c.token = "session-token";
  c.job = job;
  c.job_text = kJob;
  c.inventory = sched::FakeResources(0, 4);
  c.host = "h" + std::to_string(rank);
  c.heartbeat_interval = std::chrono::milliseconds(50);
  return c;
}

TEST(ClusterSessionTest, TwoNodesRunTheirOwnPipelines) {
  Result<JobSpec> job = ParseJobText(kJob, "job.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  std::promise<int> port;
  ClusterConfig c0 = Config(&*job, 0, 0);
  c0.on_head_port = [&](int p) { port.set_value(p); };
  auto s0 = std::async(std::launch::async, [&] { return ClusterSession::Start(c0, nullptr); });
  const int p = port.get_future().get();
  ASSERT_GT(p, 0);
  auto s1 = ClusterSession::Start(Config(&*job, 1, p), nullptr);
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  auto r0 = s0.get();
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  ASSERT_NE((*r0)->head(), nullptr);
  EXPECT_EQ((*s1)->head(), nullptr);
  // Each node runs one target and the drafter it feeds.
  EXPECT_EQ((*r0)->mine().ToString(),
            "target/0: no gpu, 1 cpu, 0 B pinned\ndrafter/0: no gpu, 1 cpu, 0 B pinned\n");
  EXPECT_EQ((*s1)->mine().ToString(),
            "target/1: no gpu, 1 cpu, 0 B pinned\ndrafter/1: no gpu, 1 cpu, 0 B pinned\n");
  EXPECT_EQ((*s1)->joined().hosts, (std::vector<std::string>{"h0", "h1"}));
  EXPECT_TRUE((*s1)->Finish(Status::Ok()).ok());
  EXPECT_TRUE((*r0)->Finish(Status::Ok()).ok());
}

TEST(ClusterSessionTest, ATokenIsRequired) {
  Result<JobSpec> job = ParseJobText(kJob, "job.toml");
  ASSERT_TRUE(job.ok());
  ClusterConfig c = Config(&*job, 0, 0);
  c.token.clear();
  auto s = ClusterSession::Start(c, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("TANDEM_TOKEN"), std::string::npos);
}

}  // namespace
}  // namespace tandem::cluster
