#include "actors/dflash/drafter_checkpointer.h"

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "actors/dflash/checkpoint_resume.h"
#include "models/dflash/dflash_checkpoint.h"

namespace tandem::dflash {

DrafterCheckpointer::DrafterCheckpointer(std::string dir, bool writer, std::string owner)
    : dir_(std::move(dir)), writer_(writer), owner_(std::move(owner)) {}

Result<ResumeState> DrafterCheckpointer::Open(models::DFlashTrainer& trainer, ResumeMode mode,
                                              bool restarted, const RunIdentity& identity,
                                              const models::DFlashConfig& config) {
  ResumeState state;
  state.identity = identity;
  ASSIGN_OR_RETURN(std::optional<ResumePoint> point,
                   OpenCheckpointDir(dir_, mode, restarted, writer_, identity, config, owner_));
  if (!point) return state;
  models::DFlashTrainerState ts;
  RETURN_IF_ERROR(models::LoadDFlashCheckpoint(point->state.path, trainer.drafter(), &ts));
  if (ts.step != point->state.step)
    return DataLossError("{}: trainer_state.json says step {}, tandem_state.json step {}",
                         point->state.path, ts.step, point->state.step);
  trainer.Restore(ts);
  state = std::move(point->state);
  state.identity = identity;
  committed_step_ = state.step;
  return state;
}

Status DrafterCheckpointer::Save(ResumeState& state, DrafterDevice& dev,
                                 models::DFlashTrainer& trainer) {
  if (!enabled()) return Status::Ok();
  RETURN_IF_ERROR(dev.Synchronize());
  if (state.step == committed_step_) return Status::Ok();  // already saved
  state.path = fmt::format("{}/{}", dir_, StepDirName(state.step));
  RETURN_IF_ERROR(CheckStepDirIsNew(state.path));
  RETURN_IF_ERROR(models::SaveDFlashCheckpoint(state.path, trainer.drafter(), trainer.state()));
  RETURN_IF_ERROR(CommitState(dir_, state));
  committed_step_ = state.step;
  return Status::Ok();
}

}  // namespace tandem::dflash
