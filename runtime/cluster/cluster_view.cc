#include "runtime/cluster/cluster_view.h"

#include <utility>

#include <fmt/format.h>

#include "runtime/control/log_ring.h"
#include "runtime/core/logging.h"

namespace tandem::cluster {
namespace {

std::string StatusKey(int rank) { return fmt::format("view/status/{}", rank); }
std::string LogsKey(int rank) { return fmt::format("view/logs/{}", rank); }

// A reply encoded by EncodeResponse, back.
Result<ControlResponse> Decode(const std::string& frame) {
  if (frame.size() < kFrameHeaderBytes)
    return DataLossError("a node report of {} bytes", frame.size());
  return DecodeResponse(frame.substr(kFrameHeaderBytes));
}

}  // namespace

NodeReporter::NodeReporter(ClusterNode* node, Ask ask, std::string job_id, Duration period)
    : node_(node), ask_(std::move(ask)), job_id_(std::move(job_id)), period_(period) {
  thread_ = std::thread([this] { Loop(); });
}

NodeReporter::~NodeReporter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void NodeReporter::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    const bool stopping = stop_;
    lock.unlock();
    if (node_->failure().ok()) ReportOnce();  // a failed cluster's head may be gone
    lock.lock();
    if (stopping) return;
    cv_.wait_for(lock, period_, [&] { return stop_; });
  }
}

void NodeReporter::ReportOnce() {
  ControlRequest status;
  status.kind = ControlRequest::Kind::kStatus;
  status.job = job_id_;
  ControlResponse s = ask_(status);
  // New lines since the last report, kept as a tail of kLogTailLines.
  while (true) {
    ControlRequest logs;
    logs.kind = ControlRequest::Kind::kLogs;
    logs.job = job_id_;
    logs.after = log_cursor_;
    ControlResponse l = ask_(logs);
    if (l.kind != ControlResponse::Kind::kLogs || l.last == log_cursor_) break;
    log_cursor_ = l.last;
    for (LogLine& line : l.lines) tail_.push_back(std::move(line));
    while (tail_.size() > kLogTailLines) tail_.pop_front();
  }
  ControlResponse tail;
  tail.kind = ControlResponse::Kind::kLogs;
  tail.lines.assign(tail_.begin(), tail_.end());
  tail.last = log_cursor_;
  tail.finished = s.kind == ControlResponse::Kind::kJobs && !s.jobs.empty() &&
                  s.jobs.front().finished();
  Status put = node_->KvPut(StatusKey(node_->rank()), EncodeResponse(s));
  if (put.ok()) put = node_->KvPut(LogsKey(node_->rank()), EncodeResponse(tail));
  if (!put.ok()) TLOG_DEBUG("node report not delivered: {}", put.ToString());
}

std::vector<NodeStatus> NodesView(const ClusterHead& head, int local_rank,
                                  const JobStatus& local) {
  std::vector<NodeStatus> out;
  for (const NodeHealth& h : head.Nodes()) {
    NodeStatus n;
    n.rank = h.rank;
    n.host = h.host;
    n.state = h.state;
    n.heartbeat_age_s = h.heard_s_ago;
    n.step = h.step;
    if (h.rank == local_rank) {
      n.report_age_s = 0;
      n.actors = local.actors;
      n.channels = local.channels;
      n.store = local.store;
    } else if (auto report = head.Peek(StatusKey(h.rank))) {
      Result<ControlResponse> r = Decode(report->first);
      if (r.ok() && r->kind == ControlResponse::Kind::kJobs && !r->jobs.empty()) {
        n.report_age_s = report->second;
        n.actors = std::move(r->jobs.front().actors);
        n.channels = std::move(r->jobs.front().channels);
        n.store = std::move(r->jobs.front().store);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

Result<ControlResponse> RemoteLogs(const ClusterHead& head, int rank, const ControlRequest& req) {
  auto report = head.Peek(LogsKey(rank));
  if (!report)
    return NotFoundError("node {} has not reported its logs yet; ask again in a second", rank);
  ASSIGN_OR_RETURN(ControlResponse tail, Decode(report->first));
  ControlResponse out;
  out.kind = ControlResponse::Kind::kLogs;
  out.last = req.after;
  for (const LogLine& l : tail.lines) {
    if (l.seq <= req.after) continue;
    if (out.lines.size() >= req.max_lines) break;
    out.last = l.seq;
    if (LogActorMatches(req.actor, l.actor)) out.lines.push_back(l);
  }
  out.finished = tail.finished && out.lines.size() < req.max_lines;
  return out;
}

}  // namespace tandem::cluster
