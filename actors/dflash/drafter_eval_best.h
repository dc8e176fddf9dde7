// DIR/best: the checkpoint of a run with the highest tau measured by speculative decoding
// (the drafter's `eval` table with keep_best; drafter_eval.h). One line of JSON,
//   {"dir": "step_00000200", "step": 200, "tau": 4.8125, "prompts": 8}
// (`jq -r .dir DIR/best` names the step directory), written atomically like `latest`
// (temp file, fsync, rename, fsync of DIR) and only after the checkpoint it names is
// durable: DrafterCheckpointer writes it right after that step's `latest`. Retention never
// removes the step it names; a fresh run (resume = false) moves it aside with the earlier
// run's checkpoints; a resumed run continues from its tau.
//
// Thread-safety: functions; the caller is the one writer of DIR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/core/status.h"

namespace tandem::dflash {

struct BestCheckpoint {
  int64_t step = 0;     // the training step, whose directory is StepDirName(step)
  double tau = 0;       // the evaluated acceptance length
  int64_t prompts = 0;  // prompts it was measured on
};

inline constexpr const char* kBestFile = "best";

// Writes DIR/best atomically and makes it durable. Errors name the path.
Status WriteBestCheckpoint(const std::string& dir, const BestCheckpoint& best);
// DIR/best, or nullopt when there is none. DataLoss naming the file when it does not parse.
Result<std::optional<BestCheckpoint>> ReadBestCheckpoint(const std::string& dir);

}  // namespace tandem::dflash
