// ClusterView: what `tandem status`, `tandem logs` and the metrics endpoint at the head of a
// job on several nodes show of the other nodes.
//
// Every node other than the head runs a NodeReporter: a thread that about once per `period`
// asks its own control handler (the `tandem run` process's job manager) for the job's status
// and for its new log lines, keeps the last kLogTailLines lines, and puts both into the
// head's key-value service under "view/status/RANK" and "view/logs/RANK", encoded as control
// replies (runtime/control/messages.h). The head then fills a status with every node
// (NodesView: health from the heartbeats, actors, channels and store from the node's last
// report) and answers `logs` for an actor that runs on another node from that node's tail
// (RemoteLogs), with the node's own line numbers as the cursor.
//
// A report is best effort: a put that fails (the head is gone) is retried at the next
// period; the heartbeats, not the reports, decide whether a node is alive.
//
// Thread-safety: NodeReporter owns its thread; NodesView and RemoteLogs are safe from any
// thread (ClusterHead is).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cluster/cluster_head.h"
#include "runtime/cluster/cluster_node.h"
#include "runtime/control/messages.h"
#include "runtime/core/clock.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/job/job_status.h"

namespace tandem::cluster {

inline constexpr size_t kLogTailLines = 2000;

class NodeReporter {
 public:
  using Ask = std::function<ControlResponse(const ControlRequest&)>;
  // Reports job `job_id` of this node through `node` (which must outlive the reporter),
  // asking `ask` (e.g. JobManager::Handle) for its status and logs, every `period`.
  NodeReporter(ClusterNode* node, Ask ask, std::string job_id, Duration period);
  ~NodeReporter();  // stops the thread after a last report
  NodeReporter(const NodeReporter&) = delete;
  NodeReporter& operator=(const NodeReporter&) = delete;

 private:
  void Loop();
  void ReportOnce();

  ClusterNode* const node_;
  const Ask ask_;
  const std::string job_id_;
  const Duration period_;
  uint64_t log_cursor_ = 0;  // the reporter's thread only
  std::deque<LogLine> tail_;  // the reporter's thread only
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// At the head: every node of the cluster, by rank; node `local_rank`'s parts come from
// `local` (this process's own status), the others' from their last reports.
std::vector<NodeStatus> NodesView(const ClusterHead& head, int local_rank,
                                  const JobStatus& local);

// At the head: the answer to logs request `req` (its actor, after, max_lines) from node
// `rank`'s last reported tail. NotFound when the node has not reported yet.
Result<ControlResponse> RemoteLogs(const ClusterHead& head, int rank, const ControlRequest& req);

}  // namespace tandem::cluster
