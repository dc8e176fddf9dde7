// DataPositionsAcrossNodes: DataParallelPositions (dp_positions.h) for a drafter group whose
// replicas run in several tandem processes (one per node, runtime/cluster).
//
// Every step, right after the gradient all-reduce, every replica of the group contributes
// the positions it trained through (its own, with the batch of this step) and gets back, per
// channel writer, the furthest position of any replica: the same merge as the in-process
// board, over the whole group. So whichever node writes the checkpoint, it holds every
// target replica's own position, and each one resumes from it. The exchange runs every step
// (a few dozen bytes per writer), not only at checkpoint steps, because a stop or a lost
// node may end the run after any step and the checkpoint then written must cover it too.
//
// The exchange is an all-gather over its own cluster::GlooGroup ("positions/GROUP"), for
// CPU and CUDA drafters alike, so it aborts with the cluster like the gradients' group.
//
// Thread-safety: one per replica, used by that replica's thread only.
#pragma once

#include <memory>
#include <string>

#include "actors/dflash/dp_positions.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem::cluster {
class ClusterNode;
class GlooGroup;
}  // namespace tandem::cluster

namespace tandem::dflash {

class DataPositionsAcrossNodes {
 public:
  // Joins global replica `rank` of `nranks` of drafter group `group`, whose input channel has
  // `writers` producers (positions are keyed 0..writers-1). `node` must outlive the result;
  // `address` is the interface Gloo listens on. Blocks until every replica connected or
  // `timeout` (also the bound of each exchange).
  static Result<std::unique_ptr<DataPositionsAcrossNodes>> Join(
      cluster::ClusterNode& node, const std::string& group, int nranks, int rank, int writers,
      const std::string& address, Duration timeout);
  ~DataPositionsAcrossNodes();

  // Every replica calls it once per step with what it trained through; returns the merge.
  // Internal error for a writer outside 0..writers-1; Unavailable when the exchange fails
  // (a node lost: the message names it).
  Result<TargetPositions> Exchange(const TargetPositions& mine);

 private:
  DataPositionsAcrossNodes(std::string group, int writers,
                           std::unique_ptr<cluster::GlooGroup> gloo);
  const std::string group_;
  const int writers_;
  std::unique_ptr<cluster::GlooGroup> gloo_;
};

}  // namespace tandem::dflash
