#include "actors/dflash/drafter_checkpointer.h"

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "models/dflash/dflash_checkpoint.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {

DrafterCheckpointer::DrafterCheckpointer(std::string dir, bool writer, std::string owner)
    : dir_(std::move(dir)), writer_(writer), owner_(std::move(owner)) {}

Result<ResumeState> DrafterCheckpointer::Resume(models::DFlashTrainer& trainer) {
  ASSIGN_OR_RETURN(std::optional<ResumeState> latest, ReadLatestState(dir_));
  if (!latest) return ResumeState();
  models::DFlashTrainerState ts;
  RETURN_IF_ERROR(models::LoadDFlashCheckpoint(latest->path, trainer.drafter(), &ts));
  trainer.Restore(ts);
  TLOG_INFO("{}: resumed from {} at step {}", owner_, latest->path, latest->step);
  last_saved_step_ = latest->step;
  return std::move(*latest);
}

Status DrafterCheckpointer::Save(ResumeState& state, DrafterDevice& dev,
                                 models::DFlashTrainer& trainer) {
  if (!enabled()) return Status::Ok();
  RETURN_IF_ERROR(dev.Synchronize());
  state.path = fmt::format("{}/step_{:08d}", dir_, state.step);
  RETURN_IF_ERROR(models::SaveDFlashCheckpoint(state.path, trainer.drafter(), trainer.state()));
  RETURN_IF_ERROR(CommitState(dir_, state));
  last_saved_step_ = state.step;
  return Status::Ok();
}

}  // namespace tandem::dflash
