// cluster_test_node: one "node" of a test cluster, started N times by cluster_process_test
// on 127.0.0.1. Rank 0 also runs the head (on a free port, printed as "PORT p").
//
//   cluster_test_node SCENARIO --rank R --nodes N [--port P] [--token T] [--head-token T]
//                     [--job-hash H] [--version V] [--heartbeat-ms MS] [--node-timeout-ms MS]
//
// Scenarios: join (join, the key-value service and a barrier, then leave), hold (join, then
// wait for the cluster's failure), gloo (the gradient average and other collectives across
// the processes, checked bitwise against the in-process arithmetic), gloo_stall (a Gloo group
// with a 120 s timeout; the last rank then holds while the others enter a barrier that only
// the cluster's failure can end: the test freezes the last rank).
// It prints one line per event on stdout: PORT, JOINED, READY, OK, ERROR msg, FAILED msg.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "runtime/cluster/cluster_head.h"
#include "runtime/cluster/cluster_node.h"
#include "runtime/cluster/gloo_group.h"
#include "runtime/cluster/slice_average.h"

namespace tandem::cluster {
namespace {

struct Args {
  std::string scenario;
  int rank = 0, nodes = 1, port = 0;
  std::string token = "test-token", head_token = "test-token";
  std::string job_hash = "job-1", version = "v1";
  int heartbeat_ms = 100, node_timeout_ms = 10000;
};

void Say(const std::string& line) {
  std::string one = line;
  for (char& c : one)
    if (c == '\n') c = ' ';
  std::fputs((one + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int Fail(const Status& st) {
  Say("ERROR " + st.ToString());
  return 1;
}

bool Parse(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->scenario = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank") a->rank = std::stoi(v);
    else if (k == "--nodes") a->nodes = std::stoi(v);
    else if (k == "--port") a->port = std::stoi(v);
    else if (k == "--token") a->token = v;
    else if (k == "--head-token") a->head_token = v;
    else if (k == "--job-hash") a->job_hash = v;
    else if (k == "--version") a->version = v;
    else if (k == "--heartbeat-ms") a->heartbeat_ms = std::stoi(v);
    else if (k == "--node-timeout-ms") a->node_timeout_ms = std::stoi(v);
    else return false;
  }
  return true;
}

// Every node runs `workers`: two replicas per node, spread by PlaceAcrossNodes.
Result<ClusterPlacement> Place(const std::vector<sched::NodeResources>& inv) {
  return PlaceAcrossNodes({{"worker", static_cast<int>(inv.size()) * 2, 0, 1, 0}}, {{}}, inv);
}

// Waits for the failure callback.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  std::string message;
  bool fired = false;
};

int RunJoin(ClusterNode& node, const Args& a) {
  const std::string mine = fmt::format("value of node {}", a.rank);
  if (Status st = node.KvPut(fmt::format("from/{}", a.rank), mine); !st.ok()) return Fail(st);
  for (int r = 0; r < a.nodes; ++r) {
    Result<std::string> v = node.KvGet(fmt::format("from/{}", r), std::chrono::seconds(60));
    if (!v.ok()) return Fail(v.status());
    if (*v != fmt::format("value of node {}", r))
      return Fail(InternalError("from/{} holds '{}'", r, *v));
  }
  if (Status st = node.Barrier("all", a.nodes, std::chrono::seconds(60)); !st.ok())
    return Fail(st);
  Say("OK");
  return 0;
}

std::vector<float> Gradients(int64_t n, int rank) {
  std::mt19937 gen(static_cast<uint32_t>(n * 131 + rank));
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  std::vector<float> g(n);
  for (float& x : g) x = dist(gen) * std::ldexp(1.f, static_cast<int>(gen() % 20) - 10);
  return g;
}

int RunGloo(ClusterNode& node, const Args& a) {
  Result<std::unique_ptr<GlooGroup>> group =
      GlooGroup::Create(&node, "grads", a.rank, a.nodes, "127.0.0.1", std::chrono::seconds(60));
  if (!group.ok()) return Fail(group.status());
  GlooGroup& g = **group;
  // Sizes below, at and above the rank count, and one not divisible by it.
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000}, int64_t{100003}}) {
    std::vector<float> mine = Gradients(n, a.rank);
    if (Status st = g.AverageInRankOrder(mine.data(), n); !st.ok()) return Fail(st);
    // The in-process path's result on the same inputs: every rank's slice, summed in rank
    // order, computed here from all ranks' gradients.
    std::vector<std::vector<float>> all;
    for (int r = 0; r < a.nodes; ++r) all.push_back(Gradients(n, r));
    std::vector<float> expect(n);
    for (int r = 0; r < a.nodes; ++r) {
      const SliceRange s = RankSlice(n, a.nodes, r);
      std::vector<const float*> in;
      for (int q = 0; q < a.nodes; ++q) in.push_back(all[q].data());
      cluster::AverageInRankOrder(in.data(), a.nodes, s.lo, s.size(), expect.data() + s.lo);
    }
    if (n > 0 && std::memcmp(mine.data(), expect.data(), n * sizeof(float)) != 0)
      return Fail(InternalError("average of {} elements differs from the in-process one", n));
    // And that arithmetic is the plain rank-order mean.
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.f;
      for (int r = 0; r < a.nodes; ++r) sum += all[r][i];
      if (sum * (1.0f / a.nodes) != expect[i])
        return Fail(InternalError("element {} is not the rank-order mean", i));
    }
  }
  uint64_t word = a.rank == 1 ? 0x1234567890abcdefull : 0;
  if (Status st = g.Broadcast(&word, sizeof(word), 1); !st.ok()) return Fail(st);
  if (word != 0x1234567890abcdefull) return Fail(InternalError("broadcast gave {:x}", word));
  std::vector<int32_t> ranks(a.nodes, -1);
  const int32_t me = a.rank * 10;
  if (Status st = g.AllGather(&me, sizeof(me), ranks.data()); !st.ok()) return Fail(st);
  for (int r = 0; r < a.nodes; ++r)
    if (ranks[r] != r * 10) return Fail(InternalError("allgather slot {} holds {}", r, ranks[r]));
  if (Status st = g.Barrier(); !st.ok()) return Fail(st);
  Say("OK");
  return 0;
}

// The barrier of the ranks other than the last must end with the cluster's failure (the
// group's own timeout is far longer), naming the frozen node: printed as FAILED.
int RunGlooStall(ClusterNode& node, const Args& a, Latch& latch) {
  Result<std::unique_ptr<GlooGroup>> group = GlooGroup::Create(
      &node, "stall", a.rank, a.nodes, "127.0.0.1", std::chrono::seconds(120));
  if (!group.ok()) return Fail(group.status());
  Say("READY");
  if (a.rank == a.nodes - 1) {  // frozen by the test; waits like `hold` if it is not
    std::unique_lock lock(latch.mu);
    latch.cv.wait_for(lock, std::chrono::seconds(120), [&] { return latch.fired; });
    return 0;
  }
  Status st = (*group)->Barrier();
  if (st.ok()) return Fail(InternalError("the barrier passed without the frozen rank"));
  Say("FAILED " + st.message());
  return 0;
}

int Main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr, "usage: cluster_test_node join|hold|gloo|gloo_stall --rank R --nodes N ...\n");
    return 2;
  }
  const auto node_timeout = std::chrono::milliseconds(a.node_timeout_ms);
  std::unique_ptr<ClusterHead> head;
  if (a.rank == 0) {
    HeadOptions ho;
    ho.nodes = a.nodes;
    ho.job_hash = a.job_hash;
    ho.version = a.version;
    ho.place = Place;
    ho.node_timeout = node_timeout;
    ho.join_timeout = std::chrono::seconds(60);
    HeadListen l;
    l.token = a.head_token;
    Result<std::unique_ptr<ClusterHead>> h = ClusterHead::Start(std::move(ho), l);
    if (!h.ok()) return Fail(h.status());
    head = std::move(*h);
    a.port = head->port();
    Say(fmt::format("PORT {}", a.port));
  }
  NodeOptions no;
  no.place = {a.rank, a.nodes, "127.0.0.1", a.port, "flags"};
  no.token = a.token;
  no.host = fmt::format("testhost{}", a.rank);
  no.job_hash = a.job_hash;
  no.version = a.version;
  no.inventory = sched::FakeResources(0, 4);
  no.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_ms);
  no.node_timeout = node_timeout;
  no.join_timeout = std::chrono::seconds(60);
  no.poll = std::chrono::milliseconds(500);
  Latch latch;
  ClusterNode node(no, [&](const Status& s) {
    std::lock_guard lock(latch.mu);
    latch.fired = true;
    latch.message = s.message();
    latch.cv.notify_all();
  });
  Result<JoinResult> joined = node.Join();
  if (!joined.ok()) return Fail(joined.status());
  Say(fmt::format("JOINED workers {}", fmt::join(joined->placement.ReplicasOn(a.rank, "worker"),
                                                 ",")));
  int rc = 0;
  if (a.scenario == "hold") {
    std::unique_lock lock(latch.mu);
    if (!latch.cv.wait_for(lock, std::chrono::seconds(120), [&] { return latch.fired; }))
      return Fail(DeadlineExceededError("no failure was reported"));
    Say("FAILED " + latch.message);
    lock.unlock();
    if (head) (void)head->Drain(std::chrono::seconds(60));
    return 0;
  }
  if (a.scenario == "gloo_stall") {
    rc = RunGlooStall(node, a, latch);
    if (head) (void)head->Drain(std::chrono::seconds(60));
    return rc;
  }
  rc = a.scenario == "gloo" ? RunGloo(node, a) : RunJoin(node, a);
  if (Status st = node.Leave(rc == 0 ? Status::Ok() : InternalError("scenario failed"));
      !st.ok())
    return Fail(st);
  if (head) {
    if (Status st = head->Drain(std::chrono::seconds(60)); !st.ok()) return Fail(st);
  }
  return rc;
}

}  // namespace
}  // namespace tandem::cluster

int main(int argc, char** argv) { return tandem::cluster::Main(argc, argv); }
