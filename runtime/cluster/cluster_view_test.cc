// The cluster view over real TCP sockets on 127.0.0.1: a node's reporter delivers its status
// and log tail to the head, which shows every node (health and parts) and answers a logs
// request for that node's actors, filtered by actor and cursor (a report larger than a
// connection's unauthenticated first frame included).
#include "runtime/cluster/cluster_view.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "runtime/cluster/cluster_test_fixture.h"

namespace tandem::cluster {
namespace {

// What node 1's job manager would answer: its status, and three log lines.
ControlResponse Node1(const ControlRequest& req) {
  ControlResponse r;
  if (req.kind == ControlRequest::Kind::kStatus) {
    r.kind = ControlResponse::Kind::kJobs;
    JobStatus j;
    j.id = "j1";
    j.state = "running";
    j.actors.emplace_back().name = "worker/1";
    j.channels.emplace_back().name = "hidden";
    j.store.capacity = 1 << 20;
    r.jobs.push_back(j);
    return r;
  }
  r.kind = ControlResponse::Kind::kLogs;
  // The long line makes the report larger than a connection's first frame may be, so the
  // put authenticates with a ping first.
  const std::vector<LogLine> all = {{1, "worker/1", "step 1"},
                                    {2, "", std::string(100000, 'x')},
                                    {3, "worker/1", "step 2"}};
  r.last = req.after;
  for (const LogLine& l : all) {
    if (l.seq <= req.after) continue;
    r.lines.push_back(l);
    r.last = l.seq;
  }
  return r;
}

TEST(ClusterViewTest, TheHeadShowsAReportingNodeAndItsLogs) {
  HeadFixture f(2);
  ASSERT_NE(f.head, nullptr);
  ClusterNode a(f.Options(0), nullptr), b(f.Options(1), nullptr);
  auto ja = std::async(std::launch::async, [&] { return a.Join(); });
  ASSERT_TRUE(b.Join().ok());
  ASSERT_TRUE(ja.get().ok());

  NodeReporter reporter(&b, Node1, "j1", std::chrono::milliseconds(50));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!f.head->Peek("view/logs/1") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();  // polls a condition, with a deadline
  ASSERT_TRUE(f.head->Peek("view/logs/1").has_value()) << "node 1 never reported";

  JobStatus local;
  local.actors.emplace_back().name = "worker/0";
  const std::vector<NodeStatus> nodes = NodesView(*f.head, 0, local);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].host, "host0");
  EXPECT_EQ(nodes[0].actors[0].name, "worker/0");
  EXPECT_EQ(nodes[1].host, "host1");
  EXPECT_EQ(nodes[1].state, "running");
  EXPECT_GE(nodes[1].report_age_s, 0);
  ASSERT_EQ(nodes[1].actors.size(), 1u);
  EXPECT_EQ(nodes[1].actors[0].name, "worker/1");
  EXPECT_EQ(nodes[1].store.capacity, 1u << 20);

  ControlRequest logs;
  logs.kind = ControlRequest::Kind::kLogs;
  logs.actor = "worker/1";
  auto got = RemoteLogs(*f.head, 1, logs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->lines.size(), 2u);
  EXPECT_EQ(got->lines[1].text, "step 2");
  EXPECT_EQ(got->last, 3u);
  logs.after = 1;  // the cursor: only what came after line 1
  got = RemoteLogs(*f.head, 1, logs);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->lines.size(), 1u);
  EXPECT_EQ(got->lines[0].seq, 3u);
  EXPECT_EQ(RemoteLogs(*f.head, 0, logs).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::cluster
