// trainer_state.json of a DFlash checkpoint (dflash_checkpoint.h): the host's training step
// and RNG seed, {"format": "tandem-dflash-trainer", "version": 1, "step": S, "seed": N}.
// Anchors and noise are pure functions of (seed, step), so these two restore the RNG too.
// Parsing validates every field: the file comes from disk, where a crash, a copy or an
// editor may have damaged it.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/core/status.h"

namespace tandem::models {

struct DFlashTrainerState {
  int64_t step = 0;   // training steps issued (drives the LR schedule, anchors and noise)
  uint64_t seed = 0;
};

// The file's text (indented JSON and a newline). REQUIRES: 0 <= step < 2^31.
std::string DFlashTrainerStateText(const DFlashTrainerState& state);

// trainer_state.json's text, every field validated (DataLoss naming `file` and the field):
// the format and version, a step in [0, 2^31) (the device counts AdamW steps in an int32),
// an unsigned seed, and no other field.
Result<DFlashTrainerState> ParseDFlashTrainerState(std::string_view text,
                                                   const std::string& file);

}  // namespace tandem::models
