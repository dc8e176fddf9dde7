// DrafterCheckpointer: where a DrafterActor's checkpoints go and how a run continues from
// them. Saves DIR/step_N (models/dflash/dflash_checkpoint.h) plus its tandem_state.json and
// then points DIR/latest at it (checkpoint_state.h), so `latest` always names a complete
// checkpoint. Only the writer (replica 0 of a data-parallel group) saves; every replica
// resumes from the same point. What to resume from and the checks before trusting it
// (newest complete step when `latest` is missing, file digests, job identity and config,
// resume = "force", never overwriting a step directory) are checkpoint_resume.h's.
//
// Thread-safety: thread-compatible; the drafter's thread only.
#pragma once

#include <cstdint>
#include <string>

#include "actors/dflash/checkpoint_state.h"
#include "models/dflash/dflash_config.h"
#include "actors/dflash/drafter_device.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

class DrafterCheckpointer {
 public:
  // `dir` "" disables saving; `writer` false (replicas other than 0) too. `owner` names the
  // actor in logs and errors.
  DrafterCheckpointer(std::string dir, bool writer, std::string owner);

  // Opens DIR for this run (checkpoint_resume.h's OpenCheckpointDir): a fresh run
  // (`mode` kOff, not `restarted`) moves an earlier run's checkpoints aside; otherwise the
  // resume point is verified against `identity` and `config` and loaded into `trainer`,
  // whose trainer_state.json must be at the same step as tandem_state.json (DataLoss).
  // Returns the state to continue from (step 0, no positions, when there is none), with
  // `identity` set. Call before the first step.
  Result<ResumeState> Open(models::DFlashTrainer& trainer, ResumeMode mode, bool restarted,
                           const RunIdentity& identity, const models::DFlashConfig& config);

  // Saves the trainer at `state.step` (waits for `dev` first) and records it as the last
  // saved step; a no-op when disabled or when this step was already saved or resumed from.
  // Refuses to write into an existing step directory (CheckStepDirIsNew). Updates state.path.
  Status Save(ResumeState& state, DrafterDevice& dev, models::DFlashTrainer& trainer);

  // True when Save writes files.
  bool enabled() const { return !dir_.empty() && writer_; }
  const std::string& dir() const { return dir_; }
  // The step of the last checkpoint saved or resumed from by this run (0: none).
  int64_t last_saved_step() const { return committed_step_ < 0 ? 0 : committed_step_; }

 private:
  std::string dir_;
  bool writer_;
  std::string owner_;
  int64_t committed_step_ = -1;  // the step directory last written or resumed from
};

}  // namespace tandem::dflash
