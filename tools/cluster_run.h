// `tandem run` on one node of a job that spans several tandem processes (one per node,
// started by Slurm, a Kubernetes JobSet or by hand; docs/scaling.md).
//
// ClusterPart::Join resolves the node's place (flags, then Slurm, then torchrun-style
// variables), and, when there is more than one node, joins the cluster: node rank 0 also
// serves the head on its TCP port. Every node proves itself with the token (TANDEM_TOKEN or
// the home's token file) and sends the job file's hash and tandem's version; the head
// refuses a mismatch, naming the node, and answers with the placement of the whole job. The
// part's RunOptions then run exactly the replicas placed on this node, and the job's
// registry carries the cluster link (runtime/cluster/node_link.h) the drafters' gradient
// all-reduce uses. Every node checks that it sees the job's checkpoint directories as the
// node writing them does (runtime/cluster/shared_dirs.h). While the job runs, Progress() feeds
// the heartbeats and failed() says when the cluster failed (a node died, hung or failed; the
// head is gone; an object link to another node broke): the caller stops the job, and Finish()
// returns the cluster's verdict naming the node. Hidden batches whose consumer runs on another
// node cross over the object links (runtime/transfer) that Options() attaches to the built job.
//
// Thread-safety: one owner thread; failed() may be read from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/cluster/cluster_session.h"
#include "runtime/cluster/cluster_view.h"
#include "runtime/control/messages.h"
#include "runtime/core/status.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/runner.h"

namespace tandem::cli {

struct ClusterFlags {
  std::optional<int> nodes;
  std::optional<int> node_rank;
  std::optional<std::string> head;  // HOST:PORT
};

class ClusterPart {
 public:
  // nullptr when the place resolves to a single node (the job runs in this process alone).
  // `job_text`: the job file's exact text (hashed); `home`: where the token file lives.
  static Result<std::unique_ptr<ClusterPart>> Join(const ClusterFlags& flags, const JobSpec& job,
                                                   const std::string& job_text,
                                                   const std::string& home,
                                                   const std::string& token_file);
  ~ClusterPart();

  // The runner options of this node's part (placement, registry with the cluster link, and
  // the object links to other nodes attached to the built job).
  RunOptions Options();
  const cluster::NodePlace& place() const { return place_; }
  // Heartbeats carry `step` from now on.
  void Progress(int64_t step);
  // Set once the cluster failed; `failure()` says why.
  bool failed() const { return failed_.load(); }
  Status failure() const;
  // Leaves the cluster with this node's result; returns the cluster's failure if there was
  // one (naming the node), else `result`.
  Status Finish(const Status& result);

  // What the node's control port shows (runtime/cluster/cluster_view.h). Decorate: statuses
  // carry this node's rank and, at the head, every node. RemoteLogs: at the head, the answer
  // to a logs request for an actor (or group) placed on another node only; nullopt when it
  // runs here. Report: on the other nodes, reports job `id` (asking `ask`) to the head about
  // once a second until the result is destroyed; null at the head.
  void Decorate(std::vector<JobStatus>* jobs) const;
  std::optional<ControlResponse> RemoteLogs(const ControlRequest& req) const;
  std::unique_ptr<cluster::NodeReporter> Report(cluster::NodeReporter::Ask ask,
                                                const std::string& id);

 private:
  ClusterPart() = default;
  cluster::NodePlace place_;
  std::shared_ptr<JobRegistry> registry_;
  std::unique_ptr<cluster::ClusterSession> session_;
  std::atomic<bool> failed_{false};
  std::string token_;  // the object links' token
  // The object links' part (cluster_links.cc).
  Result<std::shared_ptr<void>> AttachLinks(BuiltJob& built);
  void LinkFailed(const Status& why);
  mutable std::mutex link_mu_;
  Status link_failure_;  // a broken object link (also reported to the head)
};

}  // namespace tandem::cli
