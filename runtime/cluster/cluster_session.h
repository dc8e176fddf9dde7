// ClusterSession: what `tandem run` does on every node of a multi-node job, in one call:
// node rank 0 starts the head (ClusterHead) on its head port, every node joins it
// (ClusterNode) and gets the placement; at the end the node leaves and the head's process
// waits for the others (ClusterHead::Drain) before stopping the head.
//
//   auto s = ClusterSession::Start(config, [&](const Status& why) { runner.Stop(why); });
//   const sched::Placement& mine = (*s)->mine();   // the replicas this node runs
//   ... run the job with `mine`, feeding (*s)->node().SetProgress(step) ...
//   Status st = (*s)->Finish(job_status);
//
// Thread-safety: Start and Finish from one thread; node() may be used from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/cluster/cluster_head.h"
#include "runtime/cluster/cluster_node.h"
#include "runtime/cluster/node_place.h"
#include "runtime/core/status.h"
#include "runtime/job/job_spec.h"

namespace tandem::cluster {

struct ClusterConfig {
  NodePlace place;
  std::string token;             // required: the head refuses TCP without one
  const JobSpec* job = nullptr;  // the parsed job (placement); REQUIRED
  std::string job_text;          // the job file's exact text (its hash is compared)
  sched::NodeResources inventory;
  std::string host = HostName();
  // The head's listening address. "" picks 127.0.0.1 when the head host is a loopback
  // address, else 0.0.0.0 (every interface; the token guards it).
  std::string head_bind;
  Duration heartbeat_interval = std::chrono::seconds(1);
  Duration node_timeout = std::chrono::seconds(10);
  Duration join_timeout = std::chrono::minutes(5);
  Duration drain_timeout = std::chrono::seconds(60);
  // Rank 0: called with the head's bound port once it listens, before joining (head_port 0
  // binds any free port; tests pass it on to the other nodes this way).
  std::function<void(int port)> on_head_port;
};

class ClusterSession {
 public:
  // Starts the head (rank 0), joins and waits for the placement. `on_failure` runs once, on
  // the heartbeat thread, when the cluster fails (ClusterNode's callback).
  static Result<std::unique_ptr<ClusterSession>> Start(const ClusterConfig& config,
                                                       ClusterNode::FailureFn on_failure);
  ~ClusterSession();  // Finish(Cancelled) if not finished

  ClusterNode& node() { return *node_; }
  ClusterHead* head() { return head_.get(); }  // null on ranks other than 0
  const JoinResult& joined() const { return joined_; }
  // The replicas this node runs (global replica indices).
  const sched::Placement& mine() const;

  // Leaves the cluster with `why` (Ok: finished) and, on rank 0, drains and stops the head.
  // Returns the cluster's failure if there was one, else `why`. Idempotent.
  Status Finish(const Status& why);

 private:
  ClusterSession() = default;
  std::unique_ptr<ClusterHead> head_;
  std::unique_ptr<ClusterNode> node_;
  JoinResult joined_;
  Duration drain_timeout_{};
  bool finished_ = false;
  Status result_;
};

}  // namespace tandem::cluster
