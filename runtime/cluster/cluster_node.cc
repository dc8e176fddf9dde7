// ClusterNode: see cluster_node.h.
#include "runtime/cluster/cluster_node.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "runtime/core/logging.h"

namespace tandem::cluster {
namespace {

using Kind = ControlRequest::Kind;

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

std::string MakeNonce() {
  std::random_device rd;
  return fmt::format("{}-{:08x}{:08x}", ::getpid(), rd(), rd());
}

}  // namespace

Status NodeOptions::Check() const {
  for (auto [name, d] : {std::pair{"heartbeat_interval", heartbeat_interval},
                         {"node_timeout", node_timeout}, {"join_timeout", join_timeout},
                         {"poll", poll}}) {
    if (d <= Duration::zero())
      return InvalidArgumentError("cluster node: {} must be positive", name);
  }
  if (heartbeat_interval >= node_timeout)
    return InvalidArgumentError("cluster node: heartbeat_interval ({:.2f} s) must be below "
                                "node_timeout ({:.2f} s)", Seconds(heartbeat_interval),
                                Seconds(node_timeout));
  if (version.empty() || job_hash.empty())
    return InvalidArgumentError("cluster node: the version and the job hash must be set");
  if (place.node_rank < 0 || place.node_rank >= place.nodes)
    return InvalidArgumentError("cluster node: rank {} of {}", place.node_rank, place.nodes);
  return Status::Ok();
}

ClusterNode::ClusterNode(NodeOptions options, FailureFn on_failure)
    : o_(std::move(options)), on_failure_(std::move(on_failure)), nonce_(MakeNonce()) {}

ClusterNode::~ClusterNode() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
}

Endpoint ClusterNode::Head() const {
  Endpoint e;
  e.host = o_.place.head_host;
  e.tcp_port = o_.place.head_port;
  e.token = o_.token;
  return e;
}

ControlRequest ClusterNode::Request(Kind kind) const {
  ControlRequest req;
  req.kind = kind;
  req.cluster.node_rank = o_.place.node_rank;
  req.cluster.wait_ms = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(o_.poll).count());
  return req;
}

Result<ClusterReply> ClusterNode::CallOnce(const ControlRequest& req, Duration timeout,
                                           bool* unreachable) {
  Result<ControlResponse> r = Call(Head(), req, timeout);
  if (unreachable != nullptr) *unreachable = !r.ok();
  if (!r.ok()) return r.status();
  if (r->kind == ControlResponse::Kind::kError) {
    if (r->unauthenticated)
      return InvalidArgumentError("the cluster head at {}:{} refused this node's token: {} "
                                  "(every node needs the head's TANDEM_TOKEN)",
                                  o_.place.head_host, o_.place.head_port, r->error.message());
    return r->error;
  }
  if (r->kind == ControlResponse::Kind::kOk) return ClusterReply{};
  if (r->kind != ControlResponse::Kind::kCluster)
    return InternalError("the cluster head answered with an unexpected reply");
  return std::move(r->cluster);
}

Result<ClusterReply> ClusterNode::Poll(ControlRequest req, Duration timeout,
                                       Duration connect_grace, const std::string& what) {
  const TimePoint start = SteadyClock::now();
  TimePoint last_reached = start;
  // A reply takes at most poll; the rest of the call's budget covers a loaded machine.
  const Duration call_timeout = o_.poll + o_.node_timeout;
  while (true) {
    bool unreachable = false;
    Result<ClusterReply> r = CallOnce(req, call_timeout, &unreachable);
    const TimePoint now = SteadyClock::now();
    if (r.ok()) {
      if (r->ready) return r;
      last_reached = now;
    } else if (unreachable) {
      if (now - last_reached >= connect_grace)
        return UnavailableError("{}: the cluster head at {}:{} was unreachable for {:.1f} s: {}",
                                what, o_.place.head_host, o_.place.head_port,
                                Seconds(now - last_reached), r.status().message());
      // Not up yet or restarting its listener: back off briefly before the next attempt.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_; });
      if (stop_) return CancelledError("{}: the node is stopping", what);
    } else {
      return r.status();
    }
    if (now - start >= timeout)
      return DeadlineExceededError("{}: not done within {:.1f} s", what, Seconds(timeout));
  }
}

Result<JoinResult> ClusterNode::Join() {
  RETURN_IF_ERROR(o_.Check());
  ControlRequest req = Request(Kind::kClusterJoin);
  req.cluster.host = o_.host;
  req.cluster.nonce = nonce_;
  req.cluster.job_hash = o_.job_hash;
  req.cluster.version = o_.version;
  req.cluster.inventory = o_.inventory;
  ASSIGN_OR_RETURN(ClusterReply r,
                   Poll(std::move(req), o_.join_timeout, o_.join_timeout,
                        fmt::format("joining the cluster as node {} of {}", o_.place.node_rank,
                                    o_.place.nodes)));
  JoinResult out;
  out.placement.nodes = std::move(r.placement);
  out.hosts = std::move(r.hosts);
  if (static_cast<int>(out.placement.nodes.size()) != o_.place.nodes)
    return InternalError("the cluster head placed {} nodes, this node expects {}",
                         out.placement.nodes.size(), o_.place.nodes);
  heartbeats_ = std::thread([this] { HeartbeatLoop(); });
  return out;
}

Status ClusterNode::KvPut(const std::string& key, std::string value) {
  ControlRequest req = Request(Kind::kKvPut);
  req.cluster.key = key;
  req.cluster.value = std::move(value);
  req.cluster.wait_ms = 0;
  Result<ClusterReply> r = CallOnce(req, o_.node_timeout);
  if (!r.ok()) return r.status().WithContext(fmt::format("cluster kv put '{}'", key));
  return Status::Ok();
}

Result<std::string> ClusterNode::KvGet(const std::string& key, Duration timeout) {
  ControlRequest req = Request(Kind::kKvGet);
  req.cluster.key = key;
  ASSIGN_OR_RETURN(ClusterReply r, Poll(std::move(req), timeout, o_.node_timeout,
                                        fmt::format("cluster kv get '{}'", key)));
  return std::move(r.value);
}

Status ClusterNode::Barrier(const std::string& name, int count, Duration timeout) {
  ControlRequest req = Request(Kind::kBarrier);
  req.cluster.key = name;
  req.cluster.count = count;
  Result<ClusterReply> r =
      Poll(std::move(req), timeout, o_.node_timeout,
           fmt::format("cluster barrier '{}' ({} nodes)", name, count));
  return r.status();
}

void ClusterNode::SetProgress(int64_t step) {
  std::lock_guard lock(mu_);
  step_ = step;
}

void ClusterNode::ReportFailure(std::string why) {
  {
    std::lock_guard lock(mu_);
    report_ = std::move(why);
  }
  cv_.notify_all();
}

Status ClusterNode::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

void ClusterNode::Failed(Status why) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.ok()) return;
    failure_ = why;
  }
  TLOG_ERROR("cluster: {}", why.message());
  if (on_failure_) on_failure_(why);
}

void ClusterNode::HeartbeatLoop() {
  TimePoint last_reached = SteadyClock::now();
  // One heartbeat may take this long: long enough for a loaded head, short enough that an
  // unreachable head is noticed within about node_timeout.
  const Duration call_timeout = std::max<Duration>(o_.heartbeat_interval, o_.node_timeout / 4);
  std::unique_lock lock(mu_);
  while (!stop_) {
    ControlRequest req = Request(Kind::kClusterHeartbeat);
    req.cluster.step = step_;
    req.cluster.failure = report_;
    const bool reporting = !report_.empty();
    lock.unlock();
    bool unreachable = false;
    Result<ClusterReply> r = CallOnce(req, call_timeout, &unreachable);
    const TimePoint now = SteadyClock::now();
    if (r.ok()) {
      last_reached = now;
      if (!r->failure.empty()) Failed(UnavailableError("{}", r->failure));
    } else if (!unreachable) {
      Failed(r.status());  // the head's verdict (e.g. it is stopping with a failure)
    } else if (now - last_reached >= o_.node_timeout) {
      Failed(UnavailableError("the cluster head (node 0 at {}:{}) was unreachable for {:.1f} s "
                              "(node_timeout {:.1f} s): {}", o_.place.head_host,
                              o_.place.head_port, Seconds(now - last_reached),
                              Seconds(o_.node_timeout), r.status().message()));
    }
    lock.lock();
    if (reporting && r.ok()) report_.clear();
    if (!failure_.ok()) break;
    cv_.wait_for(lock, o_.heartbeat_interval, [&] { return stop_ || !report_.empty(); });
  }
}

Status ClusterNode::Leave(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (left_) return Status::Ok();
    left_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
  ControlRequest req = Request(Kind::kClusterLeave);
  req.cluster.failure = why.ok() ? "" : why.ToString();
  Result<ClusterReply> r = CallOnce(req, o_.node_timeout);
  return r.status();
}

}  // namespace tandem::cluster
