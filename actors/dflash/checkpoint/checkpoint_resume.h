// What a drafter resumes from, and the checks before it trusts a checkpoint:
//   * `latest` missing but step directories present: the newest complete step (one with a
//     valid tandem_state.json) is chosen, and the log says which and why;
//   * every file of the step is checked against the size and XXH3-64 digest recorded in its
//     tandem_state.json before any tensor is loaded (DataLoss naming the file);
//   * the job identity (seed, target model and layers, target replicas, max_tokens, data)
//     and the drafter's config.json must match the running job, unless resume = "force"
//     (then every difference is logged);
//   * no existing step directory is ever overwritten: complete steps newer than the resume
//     point are refused before any work, incomplete ones (an interrupted write, never named
//     by `latest`) are removed with a log line, and a fresh run (resume = false) moves the
//     checkpoints of an earlier run aside into DIR/previous-<time>/ instead of writing over
//     them.
//
// Thread-safety: functions. FindResumePoint only reads, so a target and a drafter may call it
// at once; the others change DIR and are called by the one drafter that writes checkpoints.
#pragma once

#include <optional>
#include <string>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "models/dflash/dflash_config.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

struct ResumePoint {
  ResumeState state;
  std::string how;  // "DIR/latest", or why another step was chosen
};

// The checkpoint a resumed run continues from: DIR/latest, or when it is missing the newest
// step directory with a valid tandem_state.json; nullopt when DIR holds no checkpoint.
Result<std::optional<ResumePoint>> FindResumePoint(const std::string& dir);

// Sizes and digests of the step's files against its state; DataLoss naming the first file
// that differs. A state without digests (an older version) is InvalidArgument unless
// `mode` is kForce.
Status VerifyStepFiles(const ResumeState& state, ResumeMode mode);

// The saved identity and config.json against the running job's. InvalidArgument listing
// every difference unless `mode` is kForce; with kForce the differences are returned as a
// note for the log ("" when none).
Result<std::string> CheckSameJob(const ResumeState& state, const RunIdentity& now,
                                 const models::DFlashConfig& config, ResumeMode mode);

// Before resuming from `state` in DIR: refuses complete steps newer than it (they would be
// overwritten) and removes incomplete ones. `who` prefixes log lines.
Status PrepareToContinue(const std::string& dir, const ResumeState& state,
                         const std::string& who);

// Before a fresh run (resume = false) in DIR: a DIR that is not a directory is
// InvalidArgument; an earlier run's `latest`, `best` and step directories are moved into
// DIR/previous-<UTC time>/ (logged), so nothing is overwritten.
Status PrepareFreshDir(const std::string& dir, const std::string& who);

// REQUIRES before writing a step directory: `path` does not exist yet.
Status CheckStepDirIsNew(const std::string& path);

// All of the above for a drafter at start: nullopt for a fresh start (after PrepareFreshDir
// when `writes` and mode is kOff and not `restarted`), else the verified point to load.
// `writes`: this replica writes checkpoints (only it changes DIR).
Result<std::optional<ResumePoint>> OpenCheckpointDir(const std::string& dir, ResumeMode mode,
                                                     bool restarted, bool writes,
                                                     const RunIdentity& now,
                                                     const models::DFlashConfig& config,
                                                     const std::string& who);

}  // namespace tandem::dflash
