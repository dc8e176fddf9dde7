// ClusterPart's object links: the part of `tandem run` on one node that attaches the links to
// other nodes (runtime/transfer/node_transfer.h) to the job once it is built.
#include <memory>

#include "runtime/cluster/channel_links.h"
#include "runtime/cluster/node_link.h"
#include "runtime/core/logging.h"
#include "runtime/transfer/node_transfer.h"
#include "tools/cluster_run.h"

namespace tandem::cli {

Result<std::shared_ptr<void>> ClusterPart::AttachLinks(BuiltJob& built) {
  const int rank = place_.node_rank;
  ASSIGN_OR_RETURN(cluster::NodeChannelPlan plan,
                   cluster::PlanChannelLinks(*built.job, session_->joined().placement, rank));
  if (plan.outgoing.empty() && plan.incoming.empty() && plan.finished_here.empty())
    return std::shared_ptr<void>();
  built.fed_from_other_nodes = plan.fed_from_other_nodes;
  const cluster::NodeLink& link = registry_->Get<cluster::NodeLink>();
  transfer::NodeTransferOptions o;
  o.node = rank;
  o.address = link.address;
  o.listen_host = link.address == "127.0.0.1" ? "127.0.0.1" : "0.0.0.0";
  o.link.token = token_;
  o.link.max_item_bytes = static_cast<uint64_t>(built.job->store_bytes);
  // A link that makes no progress for this long at the end is cut (a hung peer); the
  // heartbeats name such a peer within the node timeout anyway.
  o.link.stop_grace = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(std::max(30.0, 3 * built.job->node_timeout_s)));
  ASSIGN_OR_RETURN(std::unique_ptr<transfer::NodeTransfer> t,
                   transfer::NodeTransfer::Start(*built.job, plan, *built.channels, *built.store,
                                                 registry_->Get<transfer::WireChannels>(),
                                                 session_->node(), std::move(o),
                                                 [this](const Status& why) { LinkFailed(why); }));
  return std::shared_ptr<void>(std::move(t));
}

void ClusterPart::LinkFailed(const Status& why) {
  {
    std::lock_guard lock(link_mu_);
    if (!link_failure_.ok()) return;
    link_failure_ = why;
  }
  TLOG_ERROR("cluster failed: {}", why.ToString());
  session_->node().ReportFailure(why.message());
  failed_.store(true);
}

}  // namespace tandem::cli
