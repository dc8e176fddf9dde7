// Drafter checkpoints of a DFlash job: DIR/step_N/ holds the HF-style drafter checkpoint
// (models/dflash/dflash_checkpoint.h) plus tandem_state.json (steps, tokens, and per target shard
// the data position after the last batch trained on); DIR/latest names the newest one
// (replaced atomically after the step directory is complete).
//
// Thread-safety: functions; one drafter writes a DIR at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "actors/data/token_batch.h"
#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

struct ResumeState {
  int64_t step = 0;
  int64_t tokens = 0;
  std::string path;                               // DIR/step_N
  std::map<int, data::DataPosition> positions;    // target replica -> next position
};

// `checkpoint.dir` of a dflash.drafter section ("" when not set).
Result<std::string> CheckpointDir(const ConfigValue& drafter_section);
// The state of DIR/latest, or nullopt when DIR has no checkpoint yet.
Result<std::optional<ResumeState>> ReadLatestState(const std::string& dir);
// Writes `state` into state.path/tandem_state.json, then points DIR/latest at it.
Status CommitState(const std::string& dir, const ResumeState& state);

}  // namespace tandem::dflash
