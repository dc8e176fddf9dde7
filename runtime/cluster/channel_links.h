// Channel links across nodes: which lanes of a job's channels cross from one node to another
// under a placement, and what each node does about it.
//
// A channel with route = "replica" (runtime/channel/channel.h) sends producer p's s-th item
// to consumer (s * P + p) % C. When a producer and a consumer it feeds run on two nodes, the
// producer's node runs a *link* for that consumer: it pops the consumer's items from its own
// copy of the channel (in the consumer's order) and sends them to the consumer's node, which
// pushes each at its producer and number (Channel::PushAt), so every consumer sees exactly the
// sequence it would see in one process. One link per (channel, consumer, sending node).
//
// Each node's copy of a channel also marks as finished, from the start, every producer that
// runs elsewhere and feeds none of its consumers (so their positions are void there), and a
// link's end of stream finishes the producers it carried.
//
// Supported: any placement of a "replica" channel's writers and readers, except
// * a producer feeding two consumers on one other node (their links would interleave its
//   items), and
// * a node that both receives a producer's items and links onward to a consumer that the
//   same producer feeds;
// both are refused naming the channel, the replicas and the nodes. A channel with route =
// "any" must stay node-local (every node that runs a reader runs a writer and the other way
// round): which consumer takes an item is a race there, so no node can forward its share.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/cluster/cluster_placement.h"
#include "runtime/core/status.h"
#include "runtime/job/job_spec.h"

namespace tandem::cluster {

struct ChannelLink {
  std::string channel;
  int consumer = 0;            // the consumer (port index) the link feeds
  int from_node = 0;           // runs `producers`
  int to_node = 0;             // runs `consumer`
  std::vector<int> producers;  // producers (port indices) on from_node that feed `consumer`
  // "hidden consumer 1 (node 0 -> node 2)".
  std::string Name() const;
};

struct NodeChannelPlan {
  std::vector<ChannelLink> outgoing;  // links this node sends on
  std::vector<ChannelLink> incoming;  // links this node receives
  // Per channel: producers that run on other nodes and feed no consumer here (finished at
  // once in this node's copy of the channel).
  std::map<std::string, std::vector<int>> finished_here;
  // Channels some producer on another node feeds here: this node's writers finishing does not
  // end them (each link's end of stream does).
  std::set<std::string> fed_from_other_nodes;
};

// The plan of node `node` (see the header comment). InvalidArgument naming the channel, the
// replicas and their nodes for a layout links do not support.
Result<NodeChannelPlan> PlanChannelLinks(const JobSpec& job, const ClusterPlacement& placement,
                                         int node);

// PlanChannelLinks for every node: what the head checks before it answers with a placement.
Status CheckChannelLinks(const JobSpec& job, const ClusterPlacement& placement);

}  // namespace tandem::cluster
