// The settings of a dflash.drafter section, parsed and validated in one place so the actor
// only trains (see drafter_actor.cc for what each key does).
//
// Thread-safety: a function of its arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/io/hf_config.h"
#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

struct DrafterSettings {
  std::string in;                       // channel of HiddenBatches
  std::string target_group = "target";  // the dflash.target group it trains against
  int64_t num_layers = 2;
  int64_t max_steps = 0;                // required, >= 1
  int64_t total_steps = 0;              // LR schedule length, default max_steps
  int64_t log_every = 10;
  int64_t max_bad_steps = 5;            // non-finite steps in a row before it fails
  int64_t fail_at_step = -1;            // tests: throw once at this step (-1: never)
  bool resume = false;
  std::string metrics_file;             // JSON lines, one per log ("": none)
  double max_seconds = 0.0;             // 0: no limit
  std::vector<models::LayerType> layer_types;  // num_layers entries (default all full)
  int64_t sliding_window = 0;           // > 0 exactly when some layer slides
  std::string checkpoint_dir;           // checkpoint.dir ("": no checkpoints)
  int64_t checkpoint_every = 0;         // checkpoint.every_steps (0: only at the end)
  std::optional<int64_t> mask_token_id; // default: the target's vocab_size - 1
  int64_t anchors_per_batch = 64;
  double lr = 6e-4;
  double warmup_ratio = 0.04;
  double noise_std = 0.05;
  int64_t seed = 0;                     // default: the job seed
};

// Reads a dflash.drafter section; errors name the actor `name`.
Result<DrafterSettings> ParseDrafterSettings(const ConfigValue& s, const std::string& name,
                                             int64_t job_seed);

}  // namespace tandem::dflash
