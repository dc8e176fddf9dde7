#include "tools/cluster_run.h"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "runtime/cluster/identity.h"
#include "runtime/cluster/node_link.h"
#include "runtime/cluster/node_place.h"
#include "runtime/cluster/shared_dirs.h"
#include "runtime/control/home.h"
#include "runtime/core/logging.h"
#include "runtime/sched/resources.h"

namespace tandem::cli {
namespace {

Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

bool Loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The address this node's collectives listen on: loopback for a cluster on one machine,
// else TANDEM_NODE_ADDR when set (a node with several interfaces), else the host name.
std::string CollectiveAddress(const cluster::NodePlace& place) {
  if (Loopback(place.head_host)) return "127.0.0.1";
  if (const char* a = std::getenv("TANDEM_NODE_ADDR"); a != nullptr && *a != '\0') return a;
  return cluster::HostName();
}

}  // namespace

Result<std::unique_ptr<ClusterPart>> ClusterPart::Join(const ClusterFlags& flags,
                                                       const JobSpec& job,
                                                       const std::string& job_text,
                                                       const std::string& home,
                                                       const std::string& token_file) {
  cluster::NodeFlags nf{.nodes = flags.nodes, .node_rank = flags.node_rank, .head = flags.head};
  ASSIGN_OR_RETURN(cluster::NodePlace place, cluster::ResolveNodePlace(nf, cluster::ProcessEnv()));
  if (place.nodes <= 1) return std::unique_ptr<ClusterPart>();
  ASSIGN_OR_RETURN(std::string token, LoadToken(home, token_file));
  if (token.empty())
    return InvalidArgumentError("a job on {} nodes needs a token that every node shares: set "
                                "TANDEM_TOKEN or write one to {}/token (mode 0600)",
                                place.nodes, home);
  ASSIGN_OR_RETURN(sched::NodeResources inventory, sched::DiscoverResources());
  std::unique_ptr<ClusterPart> part(new ClusterPart());
  part->place_ = place;
  cluster::ClusterConfig cfg;
  cfg.place = place;
  part->token_ = token;
  cfg.token = std::move(token);
  cfg.job = &job;
  cfg.job_text = job_text;
  cfg.inventory = std::move(inventory);
  cfg.node_timeout = Seconds(job.node_timeout_s);
  cfg.heartbeat_interval = Seconds(std::min(1.0, job.node_timeout_s / 4));
  TLOG_INFO("{}: joining the cluster", place.ToString());
  ClusterPart* self = part.get();
  ASSIGN_OR_RETURN(part->session_,
                   cluster::ClusterSession::Start(cfg, [self](const Status& why) {
                     TLOG_ERROR("cluster failed: {}", why.ToString());
                     self->failed_.store(true);
                   }));
  TLOG_INFO("node {} of {} runs: {}", place.node_rank, place.nodes,
            part->session_->joined().placement.ToString());
  part->registry_ = std::make_shared<JobRegistry>();
  cluster::NodeLink& link = part->registry_->Get<cluster::NodeLink>();
  link.node = &part->session_->node();
  link.address = CollectiveAddress(place);
  for (const auto& r : part->session_->mine().replicas)
    link.local_replicas[r.group].push_back(r.replica);
  // A collective waits for the slowest replica's step; a peer that is gone is noticed by the
  // heartbeats within node_timeout, so the collective's own bound only has to end a wait the
  // heartbeats cannot (a peer that hangs inside the collective itself).
  link.collective_timeout_s = std::max(60.0, 6 * job.node_timeout_s);
  // Checkpoints are written once, to a directory every node must see (shared_dirs.h).
  if (Status st = cluster::CheckSharedDirs(part->session_->node(), job,
                                           part->session_->joined().placement,
                                           Seconds(link.collective_timeout_s));
      !st.ok())
    return part->session_->Finish(st);
  return part;
}

ClusterPart::~ClusterPart() {
  if (session_) (void)session_->Finish(CancelledError("tandem run ended"));
}

RunOptions ClusterPart::Options() {
  RunOptions o;
  o.registry = registry_;
  o.placement = session_->mine();
  o.fake_gpus = std::getenv("TANDEM_FAKE_GPUS") != nullptr;
  o.attach = [this](BuiltJob& built) { return AttachLinks(built); };
  return o;
}

void ClusterPart::Progress(int64_t step) { session_->node().SetProgress(step); }

Status ClusterPart::failure() const {
  Status cluster = session_->node().failure();
  if (!cluster.ok()) return cluster;
  std::lock_guard lock(link_mu_);
  return link_failure_;
}

Status ClusterPart::Finish(const Status& result) {
  Status link;
  {
    std::lock_guard lock(link_mu_);
    link = link_failure_;
  }
  Status s = session_->Finish(link.ok() ? result : link);
  return s.ok() ? link : s;
}

void ClusterPart::Decorate(std::vector<JobStatus>* jobs) const {
  for (JobStatus& j : *jobs) {
    j.node = place_.node_rank;
    if (cluster::ClusterHead* head = session_->head(); head != nullptr)
      j.nodes = cluster::NodesView(*head, place_.node_rank, j);
  }
}

std::optional<ControlResponse> ClusterPart::RemoteLogs(const ControlRequest& req) const {
  cluster::ClusterHead* head = session_->head();
  if (req.kind != ControlRequest::Kind::kLogs || head == nullptr || req.actor.empty())
    return std::nullopt;
  const cluster::ClusterPlacement& placement = session_->joined().placement;
  const size_t slash = req.actor.find('/');
  const std::string group = req.actor.substr(0, slash);
  int node = -1;
  if (slash != std::string::npos) {
    char* end = nullptr;
    const long replica = std::strtol(req.actor.c_str() + slash + 1, &end, 10);
    if (end != req.actor.c_str() + slash + 1 && *end == '\0')
      node = placement.NodeOf(group, static_cast<int>(replica));
  } else if (placement.ReplicasOn(place_.node_rank, group).empty()) {
    for (int k = 0; k < static_cast<int>(placement.nodes.size()) && node < 0; ++k)
      if (!placement.ReplicasOn(k, group).empty()) node = k;
  }
  if (node < 0 || node == place_.node_rank) return std::nullopt;
  Result<ControlResponse> r = cluster::RemoteLogs(*head, node, req);
  if (!r.ok()) return ControlResponse::Error(r.status());
  return std::move(*r);
}

std::unique_ptr<cluster::NodeReporter> ClusterPart::Report(cluster::NodeReporter::Ask ask,
                                                           const std::string& id) {
  if (session_->head() != nullptr) return nullptr;
  return std::make_unique<cluster::NodeReporter>(&session_->node(), std::move(ask), id,
                                                 std::chrono::seconds(1));
}

}  // namespace tandem::cli
