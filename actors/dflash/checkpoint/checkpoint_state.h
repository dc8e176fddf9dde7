// Drafter checkpoints of a DFlash job: DIR/step_N/ holds the HF-style drafter checkpoint
// (models/dflash/dflash_checkpoint.h) plus tandem_state.json (steps, tokens, per target shard
// the data position after the last batch trained on, the job identity it was made by, and
// the size and XXH3-64 digest of every other file of the step); DIR/latest names the newest
// one (replaced atomically after the step directory is complete).
//
// This file is the state file's format: parsing validates every field and fails with
// DataLoss naming the file and the field (a hand-edited or corrupt file never throws, never
// resumes at a nonsense step). checkpoint_resume.h decides what to resume from.
//
// Thread-safety: functions; one drafter writes a DIR at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus/token_batch.h"
#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

// What a resumed run must share with the run that saved the checkpoint (besides the
// drafter's config.json, compared on its own).
struct RunIdentity {
  uint64_t seed = 0;                      // the drafter's RNG seed (anchors, noise, init)
  std::string target_model;               // the target group's `model`
  std::vector<int64_t> target_layer_ids;  // captured target layers
  int64_t target_replicas = 1;            // data shards (the saved positions are per shard)
  int64_t max_tokens = 0;                 // tokens per packed batch
  std::string data;                       // the target's `data`
  bool operator==(const RunIdentity&) const = default;
};

// A file of a step directory as tandem_state.json records it.
struct FileDigest {
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the whole file
  bool operator==(const FileDigest&) const = default;
};

struct ResumeState {
  int64_t step = 0;
  int64_t tokens = 0;
  std::string path;                               // DIR/step_N
  // Channel writer (the target replicas writing the drafter's input channel, numbered in file
  // order: JobSpec::PortIndex) -> its next position. With one target group the writer index
  // is the replica index.
  std::map<int, data::DataPosition> positions;
  std::optional<RunIdentity> identity;            // absent in files of older versions
  std::map<std::string, FileDigest> files;        // file name in `path` -> digest
};

// Largest step, token count, epoch or batch a state file may hold (far beyond any run;
// small enough that counting on from it cannot overflow).
inline constexpr int64_t kMaxStateCount = int64_t{1} << 53;
// Target replicas a state file may name positions for.
inline constexpr int kMaxStateReplicas = 1 << 16;

// The state file's text, and back. ParseResumeState validates every field and the version
// ("format": "tandem-dflash-job"; version 2, or none for the first version, which had no
// identity and no digests); `file` names it in errors. `path` is left empty.
std::string SerializeResumeState(const ResumeState& state);
Result<ResumeState> ParseResumeState(std::string_view text, const std::string& file);

// "step_00000020" for step 20; StepOfDirName is its inverse (nullopt for anything else).
std::string StepDirName(int64_t step);
std::optional<int64_t> StepOfDirName(std::string_view name);

// `checkpoint.dir` of a dflash.drafter section ("" when not set).
Result<std::string> CheckpointDir(const ConfigValue& drafter_section);

// `resume` of a dflash.drafter section: false (default), true, or "force" (resume even when
// the checkpoint was made by a different job identity or drafter config, or has no digests;
// logged). Parsed here until the job keys declare it.
enum class ResumeMode { kOff, kOn, kForce };
Result<ResumeMode> ParseResumeMode(const ConfigValue& drafter_section);

// Reads and validates DIR/<sub>/tandem_state.json; `sub` must be a step directory name.
Result<ResumeState> ReadStepState(const std::string& dir, const std::string& sub);
// The state of DIR/latest, or nullopt when DIR has no `latest`. (What to resume from when
// `latest` is missing is checkpoint_resume.h's FindResumePoint.)
Result<std::optional<ResumeState>> ReadLatestState(const std::string& dir);
// Records the digests of every file in state.path, writes state.path/tandem_state.json,
// then points DIR/latest at it; every rename is made durable (fsync of the files and their
// directories) before the next step, so `latest` never names a step that is not on disk.
// `written`: digests the writer computed while writing (file name -> digest), taken as they
// are after checking each file's size on disk (Internal when it differs); any other file is
// read and hashed here.
Status CommitState(const std::string& dir, const ResumeState& state,
                   const std::map<std::string, FileDigest>& written = {});

}  // namespace tandem::dflash
