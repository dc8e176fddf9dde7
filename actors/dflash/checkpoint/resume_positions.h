// ResumePositions: where each dflash.target replica's data continues when the job resumes,
// carried by the job's registry (JobRegistry::Get<ResumePositions>()).
//
// The dflash.drafter class's job-prepare hook (PublishResumePositions, registered with
// runtime/job/job_prepare.h) runs once per drafter group when the job is built, before any
// actor starts: when the group resumes (`resume` true or "force") it finds the resume point
// its checkpoint directory holds (FindResumePoint, the same choice the drafter makes and
// verifies) and records that point's data positions for every group writing the drafter's
// input channel (its `in` key): the point keys them by writer index on the channel
// (checkpoint_state.h), which the hook maps back to (group, replica). Each target replica
// asks For(its group, its replica) before its first batch; no target reads a drafter's
// settings. On several nodes every node runs the hook on the same (shared) directory.
//
// Thread-safety: ResumePositions is internally locked; PublishResumePositions only reads the
// checkpoint directory.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "data/corpus/token_batch.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_spec.h"

namespace tandem::dflash {

class ResumePositions {
 public:
  // Records the positions a resume point holds for the replicas of `target_group` (by
  // replica); `from` says which point (for messages). InvalidArgument when two drafter groups
  // resume the same target group.
  Status Set(const std::string& target_group, std::map<int, data::DataPosition> positions,
             const std::string& from) EXCLUDES(mu_);
  // Where replica `replica` of `target_group` continues; nullopt: from the start of its data.
  std::optional<data::DataPosition> For(const std::string& target_group, int replica) const
      EXCLUDES(mu_);

 private:
  struct Entry {
    std::map<int, data::DataPosition> positions;
    std::string from;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> by_group_ GUARDED_BY(mu_);
};

// The dflash.drafter class's job-prepare hook (see the header comment).
Status PublishResumePositions(const JobSpec& job, const ActorGroupSpec& drafter,
                              JobRegistry& registry);

}  // namespace tandem::dflash
