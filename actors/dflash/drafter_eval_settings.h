// The `eval` table of a dflash.drafter group (`[actors.drafter.eval]` in a job file):
// every `every_steps` training steps the drafter being trained is measured by real DFlash
// speculative decoding of held-out prompts (drafter_eval.h). Declared once here (EvalKeys:
// type, range, default, doc) and parsed and validated in one place (ParseEvalSettings, from
// ParseDrafterSettings), so `tandem validate` and `tandem run` refuse a bad section before
// any work starts.
//
// Beyond each key's own type and range: `prompts` must be an existing regular file (what it
// holds is read when the drafter starts, before its first step); `block_size` at most the
// drafter's; `keep_best = true` needs checkpoint.dir. The decoder's target shares the job's
// loaded weights (dense or hybrid) and decodes in the target's precision, bf16 or fp8.
//
// Thread-safety: the table is immutable; ParseEvalSettings is reentrant.
#pragma once

#include <cstdint>
#include <string>

#include "actors/dflash/target_model.h"
#include "runtime/actor/config_keys.h"

namespace tandem::dflash {

struct EvalSettings {
  bool enabled = false;           // the group has an `eval` table
  int64_t every_steps = 0;        // evaluate after every N training steps
  std::string prompts;            // JSONL of pre-tokenized prompts (models/speculative)
  int64_t max_prompts = 0;        // decoded per evaluation: the file's first N usable ones
  int64_t max_new_tokens = 0;     // per prompt
  int64_t max_prompt_tokens = 0;  // longer prompts are skipped and counted
  double max_seconds = 0;         // time budget per evaluation (0: none)
  double temperature = 0;         // 0: greedy
  int64_t block_size = 0;         // slots the target verifies per step, <= the drafter's
  bool keep_best = false;         // DIR/best names the checkpoint with the highest tau
  bool at_end = true;             // also evaluate after the last step
};

// The keys of the `eval` table (DrafterKeys declares the table with them).
KeyTable EvalKeys();

// Parses `section` (the `eval` table, named `prefix` in messages, e.g.
// "actors.drafter.eval"). `drafter_block_size` bounds block_size (its default);
// `checkpoint_dir` ("" = none) decides keep_best's default. Every target family and
// precision can be decoded. REQUIRES: EvalKeys().Check(section) passed.
Result<EvalSettings> ParseEvalSettings(const ConfigValue& section, const std::string& prefix,
                                       int64_t drafter_block_size,
                                       const std::string& checkpoint_dir);

}  // namespace tandem::dflash
