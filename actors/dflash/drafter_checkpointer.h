// DrafterCheckpointer: where a DrafterActor's checkpoints go and how a run continues from
// them. Saves DIR/step_N (models/dflash/dflash_checkpoint.h) plus its tandem_state.json and
// then points DIR/latest at it (checkpoint_state.h), so `latest` always names a complete
// checkpoint. Only the writer (replica 0 of a data-parallel group) saves; every replica
// resumes from DIR/latest.
//
// Thread-safety: thread-compatible; the drafter's thread only.
#pragma once

#include <cstdint>
#include <string>

#include "actors/dflash/checkpoint_state.h"
#include "actors/dflash/drafter_device.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

class DrafterCheckpointer {
 public:
  // `dir` "" disables saving; `writer` false (replicas other than 0) too. `owner` names the
  // actor in logs and errors.
  DrafterCheckpointer(std::string dir, bool writer, std::string owner);

  // Loads DIR/latest into `trainer` when there is one and returns its state (step 0, no
  // positions, when there is none). Call before the first step.
  Result<ResumeState> Resume(models::DFlashTrainer& trainer);

  // Saves the trainer at `state.step` (waits for `dev` first) and records it as the last
  // saved step; a no-op when disabled. Updates state.path.
  Status Save(ResumeState& state, DrafterDevice& dev, models::DFlashTrainer& trainer);

  // True when Save writes files.
  bool enabled() const { return !dir_.empty() && writer_; }
  const std::string& dir() const { return dir_; }
  // The step of the last checkpoint saved or resumed from by this run.
  int64_t last_saved_step() const { return last_saved_step_; }

 private:
  std::string dir_;
  bool writer_;
  std::string owner_;
  int64_t last_saved_step_ = 0;
};

}  // namespace tandem::dflash
