// ClusterNode: one node's client of the cluster head (node rank 0 runs the head in its own
// process and is a client of it too).
//
//   Join() sends this node's identity and inventory and waits (re-polling) until every node
//     has joined and the head answers with the placement of the whole job. While the head is
//     not up yet (the launcher starts every node at once) connection failures are retried
//     until join_timeout. A refusal (job hash, version, duplicate rank, wrong token) returns
//     the head's error at once. After a successful Join a thread sends a heartbeat every
//     heartbeat_interval carrying the progress set by SetProgress().
//   On failure: when a heartbeat reply carries the cluster's failure (some node died,
//     stalled or reported an error), or the head cannot be reached for node_timeout, the
//     on-failure callback runs once, on the heartbeat thread, with an Unavailable Status
//     naming the node (or the head) and its last step. The callback must not call Leave().
//   KvPut / KvGet / Barrier: the head's key-value/barrier service (cluster_head.h); KvGet and
//     Barrier wait up to `timeout`, re-polling every `poll`.
//   Leave(why): stops the heartbeats and tells the head (Ok: finished; an error: this node
//     failed, and the head fails the cluster naming it).
//
// Thread-safety: every method may be called from any thread; Join once, before the others.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cluster/cluster_placement.h"
#include "runtime/cluster/identity.h"
#include "runtime/cluster/node_place.h"
#include "runtime/control/client.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/sched/resources.h"

namespace tandem::cluster {

struct NodeOptions {
  NodePlace place;
  std::string token;               // the head's token (TANDEM_TOKEN or the token file)
  std::string host = HostName();   // this node's name in messages
  std::string job_hash;            // JobHash of this node's job file
  std::string version;             // TandemVersion()
  sched::NodeResources inventory;  // what this node offers
  Duration heartbeat_interval = std::chrono::seconds(1);
  Duration node_timeout = std::chrono::seconds(10);  // head unreachable this long: failure
  Duration join_timeout = std::chrono::minutes(5);
  Duration poll = std::chrono::seconds(1);  // how long the head may hold one request

  // InvalidArgument naming the field for a non-positive duration or an empty version/hash.
  Status Check() const;
};

struct JoinResult {
  ClusterPlacement placement;      // the whole job, by node rank
  std::vector<std::string> hosts;  // each node's host, by rank
};

class ClusterNode {
 public:
  using FailureFn = std::function<void(const Status&)>;

  // REQUIRES: options.Check() is Ok (checked; a bad one is returned by Join).
  ClusterNode(NodeOptions options, FailureFn on_failure);
  ~ClusterNode();  // stops the heartbeats; does not Leave
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  const NodeOptions& options() const { return o_; }
  int rank() const { return o_.place.node_rank; }
  int nodes() const { return o_.place.nodes; }

  Result<JoinResult> Join();

  Status KvPut(const std::string& key, std::string value);
  // NotFound-free: waits for the key; DeadlineExceeded naming it after `timeout`.
  Result<std::string> KvGet(const std::string& key, Duration timeout);
  // Waits until `count` node ranks called Barrier(name, count); each rank counts once.
  Status Barrier(const std::string& name, int count, Duration timeout);

  // The progress carried by the next heartbeats (e.g. the last optimizer step).
  void SetProgress(int64_t step);
  // Reports this node's failure with the next heartbeat, sent at once.
  void ReportFailure(std::string why);
  // Ok while no failure was seen, else the Status the callback got.
  Status failure() const;
  // Stops the heartbeats and tells the head `why` (see the header comment). Idempotent.
  Status Leave(const Status& why);

 private:
  Endpoint Head() const;
  ControlRequest Request(ControlRequest::Kind kind) const;
  // Sends `req` once; a kError reply becomes its Status (the head's message).
  // `unreachable` (optional): set when no reply came at all (connect failure, timeout).
  Result<ClusterReply> CallOnce(const ControlRequest& req, Duration timeout,
                                bool* unreachable = nullptr);
  // Re-polls a waiting request until it is ready or `timeout` passes; retries connection
  // failures until node_timeout (or `connect_grace` for joins).
  Result<ClusterReply> Poll(ControlRequest req, Duration timeout, Duration connect_grace,
                            const std::string& what);
  void HeartbeatLoop();
  void Failed(Status why);

  const NodeOptions o_;
  const FailureFn on_failure_;
  const std::string nonce_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t step_ GUARDED_BY(mu_) = -1;
  std::string report_ GUARDED_BY(mu_);  // a failure to report with the next heartbeat
  Status failure_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  bool left_ GUARDED_BY(mu_) = false;
  std::thread heartbeats_;
};

}  // namespace tandem::cluster
