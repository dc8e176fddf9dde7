// Cleans what a killed drafter left in its checkpoint directory, before a job uses it:
//   - temp files of atomic writes ("NAME.tmp.PID" whose process no longer exists, and the
//     "NAME.tmp" files of checkpoint_state.cc), in DIR and its step directories;
//   - step directories ("step_N") that are clearly incomplete: no tandem_state.json, which
//     is written only after every other file of the step. The step `latest` names is never
//     touched, complete or not (resume reports a broken one itself).
// Each removal is logged. Anything else in DIR is left alone.
//
// Thread-safety: a function; the caller must be the only writer of DIR (the drafter of
// replica 0, before it trains).
#pragma once

#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::dflash {

// The removed paths. "" or a missing DIR is nothing to clean. Errors name the path that
// could not be removed.
Result<std::vector<std::string>> CleanCheckpointDir(const std::string& dir);

}  // namespace tandem::dflash
