// Retention of a drafter's checkpoints (`checkpoint.keep_last`). A 1 B-parameter
// drafter's step directory is ~15 GB (14 bytes per parameter), so a long run that keeps every
// checkpoint fills its disk; with keep_last = K, after `latest` moves, complete step
// directories (those with a tandem_state.json) older than the newest K are removed, except:
//   * never the step `latest` names;
//   * never the step DIR/best names, when that file exists (the best-tau checkpoint of an
//     evaluating run: drafter_eval_best.h; one that does not parse stops retention);
//   * never a step newer than `latest`, an incomplete one (checkpoint_cleanup.h's), or
//     anything that is not a step directory.
// A step's tandem_state.json is removed first, so a crash in the middle of a removal leaves
// an incomplete step directory, which the next run's cleanup removes.
//
// Thread-safety: a function; the caller is the only remover in DIR. The checkpoint writer may
// add newer steps and move `latest` and `best` meanwhile (the drafter's checkpointer runs the
// removals on a thread of their own): `latest` is read first and nothing newer than it is
// touched, and a `best` that moves always moves to the step being committed, which is newer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::dflash {

// Applies keep_last to DIR; returns the removed step directories (none when keep_last <= 0
// or DIR has no `latest`). DataLoss when DIR/best exists but does not name a step directory
// (nothing is removed then: the best checkpoint must not be lost to a garbled pointer);
// Internal naming the path when a removal fails.
Result<std::vector<std::string>> ApplyRetention(const std::string& dir, int64_t keep_last);

}  // namespace tandem::dflash
