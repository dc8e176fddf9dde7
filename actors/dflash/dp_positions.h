// DataParallelPositions: the data positions that the data-parallel replicas of one drafter
// group trained through, merged so that a checkpoint holds every target replica's own
// position whichever drafter replica trained its batches. Positions are keyed by the
// batch's writer index on the channel (HiddenBatch::writer), so the replicas of several
// target groups feeding one channel never share a key.
//
// The replicas of a group pop batches from one shared channel, so each replica sees only
// some batches of each target replica. In each step, before the gradient all-reduce, every
// replica publishes its positions including the batch it is training (Publish); once the
// all-reduce of that step has returned, every replica's entry for it is there, and
// Merged(step) gives, per target replica, the furthest position any replica trained
// through. Every replica adopts the merged positions after each step, so all of them hold
// the same state and the one that writes checkpoints saves positions covering the batches
// of the others. A batch one replica had taken but not trained yet, when another trained a
// later batch of the same target replica, is not replayed on resume.
//
// Reached through the job's registry: ForGroup(registry, group).
//
// Thread-safety: internally locked; shared by the group's replicas.
#pragma once

#include <cstdint>
#include <map>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

#include "data/corpus/token_batch.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/job/job_registry.h"

namespace tandem::dflash {

using TargetPositions = std::map<int, data::DataPosition>;  // channel writer -> position

class DataParallelPositions {
 public:
  // The board of drafter group `group` in the job of `registry`.
  static DataParallelPositions& ForGroup(JobRegistry& registry, const std::string& group);

  // Replica `rank` trained, by the end of `step`, through `positions`.
  void Publish(int rank, int64_t step, const TargetPositions& positions) EXCLUDES(mu_);
  // Per target replica, the furthest position of the entries of replicas `ranks` (the
  // group's replicas in this process) for `step`. Internal error when one of them has not
  // published `step` (the caller broke the contract).
  Result<TargetPositions> Merged(int64_t step, const std::vector<int>& ranks) const
      EXCLUDES(mu_);

 private:
  mutable std::mutex mu_;
  std::map<int, std::map<int64_t, TargetPositions>> by_rank_ GUARDED_BY(mu_);  // recent steps
};

// True when position `a` of a target replica comes before `b`.
inline bool Before(const data::DataPosition& a, const data::DataPosition& b) {
  return a.epoch != b.epoch ? a.epoch < b.epoch : a.next_batch < b.next_batch;
}

}  // namespace tandem::dflash
