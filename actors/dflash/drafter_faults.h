// DrafterFaults: deliberate faults a test injects into a job's dflash.drafter replicas, to
// show restarts and the checkpoint writer's behaviour under a slow or dying write. Like a
// fault-injection environment, it is not part of the job file: a job reaches it through its
// registry (JobRegistry::Get<DrafterFaults>()), a job run from a file has a default one
// (no faults), and a test installs its own by passing a registry to the runner:
//
//   auto registry = std::make_shared<JobRegistry>();
//   registry->Get<DrafterFaults>().Set({.fail_at_step = 60});
//   JobRunner runner({.registry = registry});
//
// Thread-safety: Set and Get are safe from any thread; set the faults before the run.
#pragma once

#include <cstdint>
#include <mutex>

#include "runtime/core/thread_annotations.h"

namespace tandem::dflash {

class DrafterFaults {
 public:
  struct Plan {
    // The first instance of each drafter replica throws once at this step (-1: never).
    int64_t fail_at_step = -1;
    // A background checkpoint write starts only after the loop has taken this many more
    // steps, or waits for it (0: at once): training provably continues past the snapshot.
    int64_t hold_checkpoint_write = 0;
    // keep_last's removal after a commit waits until the next checkpoint commits (or the run
    // ends); when a commit came first, DIR/REMOVAL_OVERLAPPED_BY_TEST names its step.
    bool hold_checkpoint_removal = false;
    // The write of this step stops after its files, before tandem_state.json and `latest`,
    // creates STALLED_BY_TEST in the step directory and waits until the process dies (or
    // the checkpointer is destroyed). -1: never.
    int64_t stall_checkpoint_write_at_step = -1;
  };

  void Set(const Plan& plan) EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = plan;
  }
  Plan Get() const EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return plan_;
  }

 private:
  mutable std::mutex mu_;
  Plan plan_ GUARDED_BY(mu_);
};

}  // namespace tandem::dflash
