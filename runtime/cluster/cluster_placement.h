// Placement across nodes: every actor replica of a job on one of the cluster's nodes, all or
// nothing, then GPUs, CPU slots and pinned bytes within each node by sched::Place.
//
// Each group's replicas are spread over the nodes in contiguous blocks, earlier nodes taking
// the remainder (5 replicas on 2 nodes: 0-2 on node 0, 3-4 on node 1). Groups on a channel
// (one's `out` is another's `in`: a target and the drafters it feeds) spread their positions
// among all the channel's writers or readers instead (two one-replica target groups feeding a
// two-replica drafter group: writer 0 and reader 0 on node 0, writer 1 and reader 1 on node
// 1), so with proportional counts each node runs whole pipelines and hidden states never
// cross a node. When that spread does not fit, replicas are placed one at a
// time (groups in job order, replicas ascending) on the first node that still fits them,
// preferring the node of the replica's pipeline partner. A group's `nodes` key pins it to
// those node ranks (e.g. both targets on node 0, the drafters on nodes 1 and 2): its
// positions spread in blocks over those nodes only, and first fit tries only them; a
// job in one process ignores the key. The result is deterministic: the
// same job and inventories give the same placement on every node.
//
// Replica indices in the result are the group's global ones (0..replicas-1), so a node runs
// exactly the replicas listed for it and the drafter's all-reduce ranks stay the global ones.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "runtime/core/status.h"
#include "runtime/job/job_spec.h"
#include "runtime/sched/placement.h"
#include "runtime/sched/resources.h"

namespace tandem::cluster {

struct ClusterPlacement {
  // nodes[k]: what node rank k runs; its ReplicaAssignment::replica is the global index and
  // gpus are that node's device indices. Groups in job order, replicas ascending.
  std::vector<sched::Placement> nodes;

  // The node rank that runs `group`'s replica `replica`, or -1.
  int NodeOf(std::string_view group, int replica) const;
  // The global replica indices of `group` on node `node`, ascending.
  std::vector<int> ReplicasOn(int node, std::string_view group) const;
  // "node 0: target/0: gpu 0, ...", one line per replica.
  std::string ToString() const;
};

// The per-replica requests of `job`'s groups (replicas, gpus, cpus, pinned_bytes), in job
// order. Errors name the group and key.
Result<std::vector<sched::GroupRequest>> GroupRequestsOf(const JobSpec& job);

// Places `job` on `nodes` (inventories by node rank; see the header comment). Errors:
// InvalidArgument when it does not fit, naming the group and replica that found no node and
// why each node refused it, or for a malformed request.
Result<ClusterPlacement> PlaceAcrossNodes(const JobSpec& job,
                                          const std::vector<sched::NodeResources>& nodes);
// positions[g][r] = {i, count}: replica r of group g is position i of `count` to spread in
// contiguous blocks (a channel's producer or consumer index); groups without an entry spread
// their own replica indices.
using ReplicaPositions = std::vector<std::vector<std::pair<int, int>>>;

// allowed[g]: the node ranks group g may run on (a group's `nodes` key), ascending; empty or
// absent: every node.
using AllowedNodes = std::vector<std::vector<int>>;

// The same from requests and the groups' pipeline partners: `links[i]` lists the indices of
// groups joined to group i by a channel. InvalidArgument naming the group for an allowed
// node rank that is not one of `nodes`.
Result<ClusterPlacement> PlaceAcrossNodes(const std::vector<sched::GroupRequest>& groups,
                                          const std::vector<std::vector<int>>& links,
                                          const std::vector<sched::NodeResources>& nodes,
                                          const ReplicaPositions& positions = {},
                                          const AllowedNodes& allowed = {});

}  // namespace tandem::cluster
