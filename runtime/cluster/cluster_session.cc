// ClusterSession: see cluster_session.h.
#include "runtime/cluster/cluster_session.h"

#include <utility>

#include "runtime/cluster/channel_links.h"
#include "runtime/cluster/identity.h"

namespace tandem::cluster {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

Result<std::unique_ptr<ClusterSession>> ClusterSession::Start(const ClusterConfig& c,
                                                              ClusterNode::FailureFn on_failure) {
  if (c.job == nullptr) return InvalidArgumentError("cluster session: no job");
  if (c.token.empty())
    return InvalidArgumentError("a multi-node run needs a token shared by every node (set "
                                "TANDEM_TOKEN or the token file)");
  std::unique_ptr<ClusterSession> s(new ClusterSession());
  s->drain_timeout_ = c.drain_timeout;
  const std::string hash = JobHash(c.job_text);
  const std::string version = TandemVersion();
  if (c.place.is_head()) {
    HeadOptions ho;
    ho.nodes = c.place.nodes;
    ho.job_hash = hash;
    ho.version = version;
    const JobSpec* job = c.job;
    ho.place = [job](const std::vector<sched::NodeResources>& inv)
        -> Result<ClusterPlacement> {
      ASSIGN_OR_RETURN(ClusterPlacement placed, PlaceAcrossNodes(*job, inv));
      RETURN_IF_ERROR(CheckChannelLinks(*job, placed));
      return placed;
    };
    ho.join_timeout = c.join_timeout;
    ho.node_timeout = c.node_timeout;
    HeadListen l;
    l.host = !c.head_bind.empty() ? c.head_bind
             : IsLoopback(c.place.head_host) ? "127.0.0.1"
                                              : "0.0.0.0";
    l.port = c.place.head_port;
    l.token = c.token;
    ASSIGN_OR_RETURN(s->head_, ClusterHead::Start(std::move(ho), l));
    if (c.on_head_port) c.on_head_port(s->head_->port());
  }
  NodeOptions no;
  no.place = c.place;
  if (s->head_) no.place.head_port = s->head_->port();
  no.token = c.token;
  no.host = c.host;
  no.job_hash = hash;
  no.version = version;
  no.inventory = c.inventory;
  no.heartbeat_interval = c.heartbeat_interval;
  no.node_timeout = c.node_timeout;
  no.join_timeout = c.join_timeout;
  s->node_ = std::make_unique<ClusterNode>(std::move(no), std::move(on_failure));
  Result<JoinResult> joined = s->node_->Join();
  if (!joined.ok()) {
    if (s->head_) s->head_->Stop();
    s->finished_ = true;
    return joined.status();
  }
  s->joined_ = std::move(*joined);
  return s;
}

ClusterSession::~ClusterSession() {
  (void)Finish(CancelledError("the node stopped before finishing"));
}

const sched::Placement& ClusterSession::mine() const {
  return joined_.placement.nodes[node_->rank()];
}

Status ClusterSession::Finish(const Status& why) {
  if (finished_) return result_;
  finished_ = true;
  Status left = node_->Leave(why);
  Status cluster = node_->failure();
  if (head_) {
    Status drained = head_->Drain(drain_timeout_);
    if (cluster.ok() && !drained.ok()) cluster = drained;
    head_->Stop();
  }
  if (!cluster.ok()) result_ = cluster;
  else if (!why.ok()) result_ = why;
  else result_ = left;
  return result_;
}

}  // namespace tandem::cluster
