// ClusterHead: see cluster_head.h.
#include "runtime/cluster/cluster_head.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/core/logging.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::cluster {
namespace {

using Kind = ControlRequest::Kind;
using Reply = ControlServer::Reply;

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

ControlResponse ClusterResponse(ClusterReply c) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kCluster;
  r.cluster = std::move(c);
  return r;
}

struct NodeState {
  bool joined = false;
  bool left = false;  // left after finishing: no longer watched
  bool told = false;  // has been sent the cluster's failure
  bool failed = false;  // reported a failure (heartbeat or leave)
  std::string host;
  std::string nonce;
  sched::NodeResources inventory;
  TimePoint last_seen{};
  int64_t step = -1;  // -1 before the first heartbeat

  std::string Name(int rank) const {
    return fmt::format("node {} ({})", rank, host.empty() ? "not joined" : host);
  }
};

struct Parked {
  ControlRequest req;
  Reply reply;
  TimePoint deadline;
};

}  // namespace

class ClusterHead::State {
 public:
  explicit State(HeadOptions o)
      : o_(std::move(o)), nodes_(o_.nodes), started_(o_.clock->Now()) {
    monitor_ = std::thread([this] { Monitor(); });
  }
  ~State() { Stop(); }

  void Handle(ControlRequest req, Reply reply) {
    std::vector<std::pair<Reply, ControlResponse>> out;
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        out.emplace_back(std::move(reply), ControlResponse::Error(UnavailableError(
                                               "the cluster head is stopping")));
      } else {
        HandleLocked(std::move(req), std::move(reply), &out);
      }
    }
    Send(out);
  }

  int nodes() const { return o_.nodes; }

  std::vector<NodeHealth> Nodes() const {
    std::lock_guard lock(mu_);
    const TimePoint now = o_.clock->Now();
    std::vector<NodeHealth> out;
    for (int r = 0; r < o_.nodes; ++r) {
      const NodeState& n = nodes_[r];
      NodeHealth h{r, n.host, "running", n.joined ? Seconds(now - n.last_seen) : 0.0, n.step};
      if (!n.joined) h.state = "joining";
      else if (n.left) h.state = "left";
      else if (n.failed) h.state = "failed";
      else if (now - n.last_seen >= o_.node_timeout) h.state = "lost";
      out.push_back(std::move(h));
    }
    return out;
  }

  std::optional<std::pair<std::string, double>> Peek(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = kv_.find(key);
    if (it == kv_.end()) return std::nullopt;
    return std::make_pair(it->second, Seconds(o_.clock->Now() - put_at_.at(key)));
  }

  Status failure() const {
    std::lock_guard lock(mu_);
    return failure_.empty() ? Status::Ok() : UnavailableError("{}", failure_);
  }

  Status Drain(Duration timeout) {
    std::unique_lock lock(mu_);
    const TimePoint deadline = o_.clock->Now() + timeout;
    auto done = [&](int r) {
      const NodeState& n = nodes_[r];
      if (n.left || n.told) return true;
      return !failure_.empty() && o_.clock->Now() - n.last_seen >= o_.node_timeout;
    };
    auto all_done = [&] {
      for (int r = 0; r < o_.nodes; ++r)
        if (!done(r)) return false;
      return true;
    };
    while (!all_done() && !stopping_ && o_.clock->Now() < deadline) cv_.wait_for(lock, o_.tick);
    if (!failure_.empty()) return UnavailableError("{}", failure_);
    if (all_done()) return Status::Ok();
    std::vector<std::string> there;
    for (int r = 0; r < o_.nodes; ++r)
      if (!done(r)) there.push_back(nodes_[r].Name(r));
    return DeadlineExceededError("the cluster's nodes did not all leave within {:.1f} s: {} "
                                 "still there", Seconds(timeout), fmt::join(there, ", "));
  }

  void Fail(std::string why) {
    std::vector<std::pair<Reply, ControlResponse>> out;
    {
      std::lock_guard lock(mu_);
      FailLocked(std::move(why), &out);
    }
    Send(out);
  }

  void Stop() {
    std::vector<std::pair<Reply, ControlResponse>> out;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      const Status why = failure_.empty() ? UnavailableError("the cluster head is stopping")
                                          : UnavailableError("{}", failure_);
      for (Parked& p : parked_) out.emplace_back(std::move(p.reply), ControlResponse::Error(why));
      parked_.clear();
    }
    cv_.notify_all();
    Send(out);
    if (monitor_.joinable()) monitor_.join();
  }

 private:
  using Out = std::vector<std::pair<Reply, ControlResponse>>;

  static void Send(Out& out) {
    for (auto& [reply, resp] : out) reply(std::move(resp));
    out.clear();
  }

  void HandleLocked(ControlRequest req, Reply reply, Out* out) REQUIRES(mu_) {
    const ClusterRequest& c = req.cluster;
    if (c.node_rank < 0 || c.node_rank >= o_.nodes) {
      out->emplace_back(std::move(reply), ControlResponse::Error(InvalidArgumentError(
          "node rank {} is out of range: this cluster has {} nodes (ranks 0-{})", c.node_rank,
          o_.nodes, o_.nodes - 1)));
      return;
    }
    if (req.kind == Kind::kClusterJoin) return Join(std::move(req), std::move(reply), out);
    NodeState& n = nodes_[c.node_rank];
    if (!n.joined) {
      out->emplace_back(std::move(reply), ControlResponse::Error(InvalidArgumentError(
          "node {} sent a cluster request before joining", c.node_rank)));
      return;
    }
    n.last_seen = o_.clock->Now();
    switch (req.kind) {
      case Kind::kClusterHeartbeat: {
        n.step = c.step;
        if (!c.failure.empty()) n.failed = true;
        if (!c.failure.empty())
          FailLocked(fmt::format("{} failed at step {}: {}", n.Name(c.node_rank), c.step,
                                 c.failure), out);
        ClusterReply r;
        r.ready = true;
        r.failure = failure_;
        if (!failure_.empty()) {
          n.told = true;
          cv_.notify_all();
        }
        out->emplace_back(std::move(reply), ClusterResponse(std::move(r)));
        return;
      }
      case Kind::kClusterLeave: {
        if (c.failure.empty()) {
          n.left = true;
          cv_.notify_all();
        } else {
          n.failed = true;
          FailLocked(fmt::format("{} left at step {}: {}", n.Name(c.node_rank), n.step,
                                 c.failure), out);
        }
        out->emplace_back(std::move(reply), ControlResponse{});
        return;
      }
      case Kind::kKvPut:
        kv_[c.key] = c.value;
        put_at_[c.key] = n.last_seen;
        out->emplace_back(std::move(reply), ControlResponse{});
        Wake(out);
        return;
      case Kind::kBarrier: {
        Barrier& b = barriers_[c.key];
        if (b.count == 0) b.count = c.count;
        if (c.count < 1 || c.count != b.count) {
          out->emplace_back(std::move(reply), ControlResponse::Error(InvalidArgumentError(
              "barrier '{}': node {} expects {} arrivals, others {}", c.key, c.node_rank,
              c.count, b.count)));
          return;
        }
        b.arrived.insert(c.node_rank);
        break;
      }
      default: break;
    }
    Park(std::move(req), std::move(reply));
    Wake(out);
  }

  void Join(ControlRequest req, Reply reply, Out* out) REQUIRES(mu_) {
    const ClusterRequest& c = req.cluster;
    NodeState& n = nodes_[c.node_rank];
    const std::string who = fmt::format("node {} ({})", c.node_rank, c.host);
    if (c.version != o_.version) {
      const std::string msg = fmt::format(
          "{} runs tandem '{}' but the head runs '{}': start every node from the same build",
          who, c.version, o_.version);
      out->emplace_back(std::move(reply), ControlResponse::Error(InvalidArgumentError("{}", msg)));
      return FailLocked(msg, out);
    }
    if (c.job_hash != o_.job_hash) {
      const std::string msg = fmt::format(
          "{} has job file hash {} but the head has {}: every node must read the same job file",
          who, c.job_hash, o_.job_hash);
      out->emplace_back(std::move(reply), ControlResponse::Error(InvalidArgumentError("{}", msg)));
      return FailLocked(msg, out);
    }
    if (n.joined && n.nonce != c.nonce) {
      out->emplace_back(std::move(reply), ControlResponse::Error(InvalidArgumentError(
          "node rank {} is already taken by {}; {} claims it too (check each node's rank)",
          c.node_rank, n.host, c.host)));
      return;
    }
    if (!failure_.empty()) {
      out->emplace_back(std::move(reply), ControlResponse::Error(UnavailableError("{}", failure_)));
      return;
    }
    if (!n.joined) {
      n.joined = true;
      n.host = c.host;
      n.nonce = c.nonce;
      n.inventory = c.inventory;
      TLOG_INFO("cluster: {} joined ({})", who, n.inventory.ToString());
    }
    n.last_seen = o_.clock->Now();
    Park(std::move(req), std::move(reply));
    if (!placed_ && std::all_of(nodes_.begin(), nodes_.end(), [](const NodeState& s) {
          return s.joined;
        })) {
      Place(out);
    }
    Wake(out);
  }

  void Place(Out* out) REQUIRES(mu_) {
    std::vector<sched::NodeResources> inv;
    for (const NodeState& s : nodes_) inv.push_back(s.inventory);
    Result<ClusterPlacement> p = o_.place(inv);
    if (!p.ok()) return FailLocked(p.status().WithContext("placing the job").message(), out);
    placement_ = std::move(*p);
    placed_ = true;
    // Liveness is judged from placement on; joins waited on the slowest node until now.
    for (NodeState& s : nodes_) s.last_seen = o_.clock->Now();
    TLOG_INFO("cluster: all {} nodes joined; placement:\n{}", o_.nodes, placement_.ToString());
  }

  void Park(ControlRequest req, Reply reply) REQUIRES(mu_) {
    const Duration wait =
        std::min<Duration>(std::chrono::milliseconds(req.cluster.wait_ms), o_.max_wait);
    parked_.push_back({std::move(req), std::move(reply), o_.clock->Now() + wait});
  }

  // Answers the parked requests that can be answered now: ready ones, all of them once the
  // cluster failed, and those whose wait ended (with ready = false; the node asks again).
  void Wake(Out* out) REQUIRES(mu_) {
    const TimePoint now = o_.clock->Now();
    for (auto it = parked_.begin(); it != parked_.end();) {
      std::optional<ControlResponse> resp = Answer(it->req, now >= it->deadline);
      if (!resp) {
        ++it;
        continue;
      }
      out->emplace_back(std::move(it->reply), std::move(*resp));
      it = parked_.erase(it);
    }
  }

  // The response to a parked request now, or nullopt to keep waiting.
  std::optional<ControlResponse> Answer(const ControlRequest& req, bool expired) REQUIRES(mu_) {
    if (!failure_.empty()) return ControlResponse::Error(UnavailableError("{}", failure_));
    ClusterReply r;
    switch (req.kind) {
      case Kind::kClusterJoin:
        r.ready = placed_;
        if (placed_) {
          r.placement = placement_.nodes;
          for (const NodeState& s : nodes_) r.hosts.push_back(s.host);
        }
        break;
      case Kind::kKvGet: {
        auto it = kv_.find(req.cluster.key);
        r.ready = it != kv_.end();
        if (r.ready) r.value = it->second;
        break;
      }
      case Kind::kBarrier: {
        const Barrier& b = barriers_[req.cluster.key];
        r.ready = static_cast<int>(b.arrived.size()) >= b.count;
        break;
      }
      default: return ControlResponse::Error(InternalError("unexpected parked request"));
    }
    if (!r.ready && !expired) return std::nullopt;
    return ClusterResponse(std::move(r));
  }

  void FailLocked(std::string why, Out* out) REQUIRES(mu_) {
    if (!failure_.empty()) return;
    failure_ = std::move(why);
    TLOG_ERROR("cluster: {}", failure_);
    cv_.notify_all();
    Wake(out);
  }

  void Monitor() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, o_.tick);
      if (stopping_) break;
      Out out;
      CheckDeadlines(&out);
      Wake(&out);
      lock.unlock();
      Send(out);
      lock.lock();
    }
  }

  void CheckDeadlines(Out* out) REQUIRES(mu_) {
    if (!failure_.empty()) return;
    const TimePoint now = o_.clock->Now();
    if (!placed_) {
      if (now - started_ < o_.join_timeout) return;
      std::vector<int> missing;
      for (int r = 0; r < o_.nodes; ++r)
        if (!nodes_[r].joined) missing.push_back(r);
      return FailLocked(fmt::format("node rank(s) {} did not join within {:.1f} s ({} of {} "
                                    "nodes joined)", fmt::join(missing, ", "),
                                    Seconds(o_.join_timeout), o_.nodes - missing.size(),
                                    o_.nodes), out);
    }
    for (int r = 0; r < o_.nodes; ++r) {
      const NodeState& n = nodes_[r];
      if (n.left || now - n.last_seen < o_.node_timeout) continue;
      return FailLocked(
          fmt::format("{} was not heard from for {:.1f} s (node_timeout {:.1f} s); its last "
                      "step was {}", n.Name(r), Seconds(now - n.last_seen),
                      Seconds(o_.node_timeout), n.step), out);
    }
  }

  struct Barrier {
    int count = 0;
    std::set<int> arrived;
  };

  const HeadOptions o_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<NodeState> nodes_ GUARDED_BY(mu_);
  const TimePoint started_;
  bool placed_ GUARDED_BY(mu_) = false;
  ClusterPlacement placement_ GUARDED_BY(mu_);
  std::string failure_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, std::string> kv_ GUARDED_BY(mu_);
  std::map<std::string, TimePoint> put_at_ GUARDED_BY(mu_);  // when each key was last put
  std::map<std::string, Barrier> barriers_ GUARDED_BY(mu_);
  std::vector<Parked> parked_ GUARDED_BY(mu_);
  std::thread monitor_;
};

Status HeadOptions::Check() const {
  if (nodes < 1 || nodes > 65536)
    return InvalidArgumentError("cluster head: nodes = {} is out of range (1-65536)", nodes);
  if (!place) return InvalidArgumentError("cluster head: no placement function");
  for (auto [name, d] : {std::pair{"join_timeout", join_timeout}, {"node_timeout", node_timeout},
                         {"max_wait", max_wait}, {"tick", tick}}) {
    if (d <= Duration::zero())
      return InvalidArgumentError("cluster head: {} must be positive", name);
  }
  if (clock == nullptr) return InvalidArgumentError("cluster head: no clock");
  return Status::Ok();
}

Result<std::unique_ptr<ClusterHead>> ClusterHead::Create(HeadOptions options) {
  RETURN_IF_ERROR(options.Check());
  std::unique_ptr<ClusterHead> head(new ClusterHead());
  head->state_ = std::make_unique<State>(std::move(options));
  return head;
}

Result<std::unique_ptr<ClusterHead>> ClusterHead::Start(HeadOptions options, HeadListen listen) {
  ASSIGN_OR_RETURN(std::unique_ptr<ClusterHead> head, Create(std::move(options)));
  ServerOptions so;
  so.tcp_host = listen.host;
  so.tcp_port = listen.port;
  so.token = listen.token;
  so.limits = listen.limits;
  // Each node holds up to two connections at once (a heartbeat and a waiting request).
  const size_t nodes = static_cast<size_t>(head->state_->nodes());
  so.limits.max_connections = std::max(so.limits.max_connections, 4 * nodes + 16);
  State* state = head->state_.get();
  Result<std::unique_ptr<ControlServer>> server = ControlServer::Start(
      std::move(so), [state](ControlRequest req, ControlServer::Reply reply) {
        // A client sends a ping first to authenticate a request over 64 KiB (client.h).
        if (req.kind == Kind::kPing) {
          ControlResponse pong;
          pong.kind = ControlResponse::Kind::kPong;
          pong.server = "cluster head";
          return reply(std::move(pong));
        }
        if (!IsClusterRequest(req))
          return reply(ControlResponse::Error(InvalidArgumentError(
              "this port serves only a tandem cluster's nodes (use the run's control port)")));
        state->Handle(std::move(req), std::move(reply));
      });
  if (!server.ok()) return server.status().WithContext("starting the cluster head");
  head->server_ = std::move(*server);
  return head;
}

ClusterHead::~ClusterHead() { Stop(); }

bool ClusterHead::IsClusterRequest(const ControlRequest& req) {
  switch (req.kind) {
    case Kind::kClusterJoin:
    case Kind::kClusterHeartbeat:
    case Kind::kClusterLeave:
    case Kind::kKvPut:
    case Kind::kKvGet:
    case Kind::kBarrier: return true;
    default: return false;
  }
}

void ClusterHead::Handle(ControlRequest req, ControlServer::Reply reply) {
  state_->Handle(std::move(req), std::move(reply));
}

int ClusterHead::port() const { return server_ ? server_->tcp_port() : -1; }
Status ClusterHead::failure() const { return state_->failure(); }
std::vector<NodeHealth> ClusterHead::Nodes() const { return state_->Nodes(); }
std::optional<std::pair<std::string, double>> ClusterHead::Peek(const std::string& key) const {
  return state_->Peek(key);
}
Status ClusterHead::Drain(Duration timeout) { return state_->Drain(timeout); }
void ClusterHead::Fail(std::string why) { state_->Fail(std::move(why)); }

void ClusterHead::Stop() {
  if (state_) state_->Stop();
  if (server_) server_->Stop();
}

}  // namespace tandem::cluster
