// The head and its nodes in one process over real TCP sockets on 127.0.0.1: join and
// placement, the key-value and barrier service, refusals, and a reported failure reaching
// every node. (cluster_process_test runs the same with one process per node.)
#include "runtime/cluster/cluster_head.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "runtime/cluster/cluster_node.h"
#include "runtime/cluster/cluster_test_fixture.h"

namespace tandem::cluster {
namespace {

// Records the first failure a node reports, and lets a test wait for it.
struct FailureLatch {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> got;
  ClusterNode::FailureFn Fn() {
    return [this](const Status& s) {
      std::lock_guard lock(mu);
      if (!got) got = s;
      cv.notify_all();
    };
  }
  Status Wait() {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return got.has_value(); }));
    return got.value_or(Status::Ok());
  }
};

TEST(ClusterHeadTest, JoinKvAndBarrier) {
  HeadFixture f(2);
  ClusterNode a(f.Options(0), nullptr), b(f.Options(1), nullptr);
  auto ja = std::async(std::launch::async, [&] { return a.Join(); });
  auto jb = b.Join();
  ASSERT_TRUE(jb.ok()) << jb.status().ToString();
  auto ja_r = ja.get();
  ASSERT_TRUE(ja_r.ok()) << ja_r.status().ToString();
  EXPECT_EQ(jb->placement.ReplicasOn(0, "worker"), (std::vector<int>{0, 1}));
  EXPECT_EQ(jb->placement.ReplicasOn(1, "worker"), (std::vector<int>{2, 3}));
  EXPECT_EQ(jb->hosts, (std::vector<std::string>{"host0", "host1"}));
  EXPECT_EQ(ja_r->placement.ToString(), jb->placement.ToString());

  // A get waits (re-polling past several poll windows) for a put that comes later.
  auto got = std::async(std::launch::async,
                        [&] { return b.KvGet("nccl/id", std::chrono::seconds(60)); });
  ASSERT_TRUE(a.Barrier("before-put", 1, std::chrono::seconds(5)).ok());
  const std::string id("\0\1\2 bytes", 9);
  ASSERT_TRUE(a.KvPut("nccl/id", id).ok());
  auto v = got.get();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, id);

  // A missing key times out naming it.
  auto missing = a.KvGet("nope", std::chrono::milliseconds(300));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);

  // A barrier of 2 passes only when both arrived.
  auto first = std::async(std::launch::async,
                          [&] { return a.Barrier("step-1", 2, std::chrono::seconds(60)); });
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_TRUE(b.Barrier("step-1", 2, std::chrono::seconds(60)).ok());
  EXPECT_TRUE(first.get().ok());
  EXPECT_FALSE(a.Barrier("step-1", 3, std::chrono::seconds(1)).ok());  // count disagrees

  EXPECT_TRUE(a.Leave(Status::Ok()).ok());
  EXPECT_TRUE(b.Leave(Status::Ok()).ok());
  EXPECT_TRUE(f.head->failure().ok()) << f.head->failure().ToString();
}

TEST(ClusterHeadTest, ReportedFailureReachesEveryNode) {
  HeadFixture f(2);
  FailureLatch la, lb;
  ClusterNode a(f.Options(0), la.Fn()), b(f.Options(1), lb.Fn());
  auto ja = std::async(std::launch::async, [&] { return a.Join(); });
  ASSERT_TRUE(b.Join().ok());
  ASSERT_TRUE(ja.get().ok());
  b.SetProgress(17);
  b.ReportFailure("drafter/1: out of memory");
  for (FailureLatch* l : {&la, &lb}) {
    Status s = l->Wait();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("node 1 (host1) failed at step 17: drafter/1: out of memory"),
              std::string::npos)
        << s.ToString();
  }
  // Requests after the failure carry it too.
  auto v = a.KvGet("x", std::chrono::seconds(5));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("node 1 (host1)"), std::string::npos);
}

TEST(ClusterHeadTest, RefusesMismatchesAndDuplicates) {
  HeadFixture f(3);
  // Two processes claim rank 0 from different hosts: whichever comes second is refused,
  // naming both; the first waits for the cluster.
  NodeOptions dup = f.Options(0);
  dup.host = "intruder";
  ClusterNode a(f.Options(0), nullptr), d(dup, nullptr);
  auto ja = std::async(std::launch::async, [&] { return a.Join(); });
  auto jd = std::async(std::launch::async, [&] { return d.Join(); });
  // Wrong token: refused by the server before the head sees it.
  NodeOptions bad_token = f.Options(1);
  bad_token.token = "wrong";
  auto t = ClusterNode(bad_token, nullptr).Join();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("refused this node's token"), std::string::npos)
      << t.status().ToString();
  // One of the two rank-0 joins is refused now; the other is still waiting.
  auto first_done = [&]() -> std::future<Result<JoinResult>>* {
    while (true) {
      if (ja.wait_for(std::chrono::milliseconds(10)) == std::future_status::ready) return &ja;
      if (jd.wait_for(std::chrono::milliseconds(10)) == std::future_status::ready) return &jd;
    }
  }();
  auto refused = first_done->get();
  ASSERT_FALSE(refused.ok());
  const std::string m = refused.status().message();
  EXPECT_TRUE(m.find("node rank 0 is already taken by host0; intruder claims it too") !=
                  std::string::npos ||
              m.find("node rank 0 is already taken by intruder; host0 claims it too") !=
                  std::string::npos)
      << m;
  EXPECT_TRUE(f.head->failure().ok());
  // A different job file fails the cluster, naming the node and both hashes; the waiting
  // rank 0 learns it too.
  NodeOptions other = f.Options(2);
  other.job_hash = "hash-b";
  auto o = ClusterNode(other, nullptr).Join();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("node 2 (host2) has job file hash hash-b but the head "
                                      "has hash-a"),
            std::string::npos)
      << o.status().ToString();
  auto waiting = (first_done == &ja ? jd : ja).get();
  ASSERT_FALSE(waiting.ok());
  EXPECT_NE(waiting.status().message().find("hash-b"), std::string::npos)
      << waiting.status().ToString();
}

TEST(ClusterHeadTest, JoinTimeoutNamesTheMissingRanks) {
  HeadOptions o;
  o.nodes = 3;
  o.job_hash = "h";
  o.version = "v";
  o.join_timeout = std::chrono::milliseconds(300);
  o.place = [](const std::vector<sched::NodeResources>& inv) {
    return PlaceAcrossNodes(std::vector<sched::GroupRequest>{}, {}, inv);
  };
  HeadListen l;
  l.token = kTestToken;
  auto head = ClusterHead::Start(std::move(o), l);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  NodeOptions n;
  n.place = {1, 3, "127.0.0.1", (*head)->port(), "flags"};
  n.token = kTestToken;
  n.job_hash = "h";
  n.version = "v";
  auto r = ClusterNode(n, nullptr).Join();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node rank(s) 0, 2 did not join"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace tandem::cluster
