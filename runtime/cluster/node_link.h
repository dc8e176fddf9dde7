// NodeLink: how the actors of a job that spans several tandem processes (one per node) reach
// the cluster their process joined: the ClusterNode (key-value service, barriers, heartbeats)
// and the address this node's collectives listen on. It lives in the job's registry
// (JobRegistry::Get<NodeLink>()); in a single-process job `node` stays null and actors use
// their in-process paths (e.g. the drafter's gradient all-reduce).
//
// Thread-safety: `tandem run` sets the fields before the job's actors start (it passes the
// registry in RunOptions); afterwards they are only read, from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tandem::cluster {

class ClusterNode;

struct NodeLink {
  ClusterNode* node = nullptr;   // null: the job runs in one process
  std::string address;           // this node's address for collectives (Gloo's TCP device)
  double collective_timeout_s = 0;  // how long one cross-process collective may wait
  std::map<std::string, std::vector<int>> local_replicas;  // group -> its replicas here
};

}  // namespace tandem::cluster
