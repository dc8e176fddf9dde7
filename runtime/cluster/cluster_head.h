// ClusterHead: node rank 0's side of a cluster. It admits the nodes, places the job across
// them, serves the key-value/barrier service and watches heartbeats.
//
//   Join: a node sends its rank, host, job hash, tandem version and inventory. A job hash or
//     version different from the head's is refused with an error naming the node (rank and
//     host) and both values, and fails the cluster (the nodes disagree on what to run); a
//     second process claiming a rank already taken is refused (it names both hosts) while
//     the cluster goes on waiting for the right one. When all `nodes` have joined, the head
//     places the job (HeadOptions::place) and answers every join with the whole placement.
//     If they have not all joined within join_timeout, the cluster fails naming the ranks
//     still missing.
//   Key-value and barrier: Put(key, bytes); Get(key) waits until the key exists;
//     Barrier(name, count) waits until `count` node ranks arrived. A value is overwritten by
//     a later Put of the same key. Used for NCCL unique ids and Gloo's rendezvous.
//   Heartbeats: after placement, a node not heard from (heartbeat or any request) within
//     node_timeout, or one that reports a failure or leaves with one, fails the cluster with
//     a message naming it (rank, host, last step). Every later reply to a heartbeat, get,
//     barrier or join carries that failure, so each node learns it on its next heartbeat.
//
// Waiting requests (join, get, barrier) never block the server's I/O thread: they are parked
// with their Reply and answered when the state changes, or with "not yet" (ready = false)
// after at most the request's wait_ms (capped by max_wait); the client then asks again.
// Bounded waits keep a dead client's connection from being held forever (the server does
// not read from a connection that awaits its reply, so it would not notice), and each
// re-poll counts as the node being alive.
//
// Thread-safety: every public method is safe from any thread. Replies are sent outside the
// head's lock; a monitor thread checks deadlines every `tick`.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cluster/cluster_placement.h"
#include "runtime/control/server.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/sched/resources.h"

namespace tandem::cluster {

// One node as the head sees it (ClusterHead::Nodes).
struct NodeHealth {
  int rank = 0;
  std::string host;           // "" before it joined
  std::string state;          // joining, running, left, failed, lost (silent >= node_timeout)
  double heard_s_ago = 0;     // since its last request (heartbeat or any other)
  int64_t step = -1;          // the step its last heartbeat carried
};

struct HeadOptions {
  int nodes = 1;
  std::string job_hash;  // the head's own job file's JobHash
  std::string version;   // TandemVersion()
  // Places the job on the joined nodes' inventories (by rank); usually
  // [&job](const auto& inv) { return PlaceAcrossNodes(job, inv); }.
  std::function<Result<ClusterPlacement>(const std::vector<sched::NodeResources>&)> place;
  Duration join_timeout = std::chrono::minutes(5);
  Duration node_timeout = std::chrono::seconds(10);
  Duration max_wait = std::chrono::seconds(2);  // longest a request is held before "not yet"
  Duration tick = std::chrono::milliseconds(50);  // how often deadlines are checked
  const Clock* clock = &RealClock();

  // InvalidArgument naming the field for nodes < 1, a missing place function or a
  // non-positive duration.
  Status Check() const;
};

// Where the head listens. The token is required (ControlServer refuses TCP without one);
// bind to the node's address, or 0.0.0.0 to accept every interface.
struct HeadListen {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see ClusterHead::port())
  std::string token;
  ServerLimits limits;  // max_connections is raised to at least 4 per node
};

class ClusterHead {
 public:
  // Starts the head's logic and monitor thread without a server of its own: requests come
  // through Handle (e.g. from a ControlServer that serves other requests too).
  static Result<std::unique_ptr<ClusterHead>> Create(HeadOptions options);
  // The same plus a ControlServer on `listen` that hands cluster requests to Handle, answers
  // a ping (how a client authenticates before a request over 64 KiB) and refuses the others.
  static Result<std::unique_ptr<ClusterHead>> Start(HeadOptions options, HeadListen listen);
  ~ClusterHead();  // Stop()
  ClusterHead(const ClusterHead&) = delete;
  ClusterHead& operator=(const ClusterHead&) = delete;

  // True for the cluster kinds of ControlRequest, which Handle answers (now or later).
  static bool IsClusterRequest(const ControlRequest& req);
  // REQUIRES: IsClusterRequest(req). Calls `reply` exactly once, possibly later and from the
  // monitor thread.
  void Handle(ControlRequest req, ControlServer::Reply reply);

  // The bound TCP port (Start only), else -1.
  int port() const;
  // Ok while healthy, else Unavailable with the failure message.
  Status failure() const;
  // Every node's health, by rank.
  std::vector<NodeHealth> Nodes() const;
  // The value the key-value service holds under `key` and the seconds since it was put;
  // nullopt when absent. Does not wait.
  std::optional<std::pair<std::string, double>> Peek(const std::string& key) const;
  // Waits until every node is done with the head: it left, or (once the cluster failed) it
  // was told of the failure or has itself been silent for node_timeout. The head's process
  // calls it before stopping, so nodes still finishing or still to learn of a failure can
  // reach the head. Returns the cluster's failure, Ok, or DeadlineExceeded after `timeout`
  // naming the nodes still there.
  Status Drain(Duration timeout);
  // Fails the cluster with `why` (e.g. the head's own job failed); idempotent.
  void Fail(std::string why);
  // Answers every parked request (with the failure or "the head is stopping"), stops the
  // server and the monitor. Idempotent.
  void Stop();

  class State;

 private:
  ClusterHead() = default;
  std::unique_ptr<State> state_;
  std::unique_ptr<ControlServer> server_;
};

}  // namespace tandem::cluster
