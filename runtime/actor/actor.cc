#include "runtime/actor/actor.h"

#include "runtime/actor/cell.h"

namespace tandem {

std::string_view ActorStateName(ActorState state) {
  switch (state) {
    case ActorState::kCreated: return "created";
    case ActorState::kStarted: return "started";
    case ActorState::kRunning: return "running";
    case ActorState::kStopping: return "stopping";
    case ActorState::kStopped: return "stopped";
    case ActorState::kFailed: return "failed";
    case ActorState::kRestarting: return "restarting";
  }
  return "unknown";
}

void Actor::SetStage(std::string stage) {
  if (cell_ != nullptr) cell_->SetStage(std::move(stage));
}

bool Actor::stop_requested() const { return cell_ != nullptr && cell_->stop_requested(); }

}  // namespace tandem
