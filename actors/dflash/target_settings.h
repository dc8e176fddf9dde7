// The settings of a dflash.target section, parsed and validated in one place: the model it
// runs (TargetModelSpec, also read by the drafter and the pipeline bench from the target's
// section) and where its batches come from.
//
// Thread-safety: functions of their arguments.
#pragma once

#include <cstdint>
#include <string>

#include "actors/dflash/synthetic_source.h"
#include "actors/dflash/target_model.h"
#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

struct TargetSettings {
  std::string out;             // channel the HiddenBatches go to
  TargetModelSpec model;
  std::string data = "synthetic";  // "synthetic", or a file for actors/data's MakeBatchSource
  SyntheticOptions synthetic;  // when data = "synthetic" (doc_len, batches_per_epoch, epochs,
                               // noise; vocab, max_tokens and seed follow the model and job)
};

// Reads `model`, `target_config` (table of HF config.json keys, for model = "random"),
// `seed` (default: job seed), `max_tokens` and `layers` (default DFlashTargetLayerIds(n,
// `num_context_layers` default 5)) from a dflash.target section.
Result<TargetModelSpec> ParseTargetModelSpec(const ConfigValue& section, int64_t job_seed);

// Reads a whole dflash.target section; errors name the actor `name`. A non-synthetic `data`
// is parsed by actors/data from the section itself.
Result<TargetSettings> ParseTargetSettings(const ConfigValue& section, const std::string& name,
                                           int64_t job_seed);

}  // namespace tandem::dflash
