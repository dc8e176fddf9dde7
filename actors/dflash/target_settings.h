// Settings of a dflash.target group, declared once (TargetKeys: name, type, range, default,
// doc) and parsed and validated in one place (ParseTargetSettings), both when the job is
// checked (`tandem validate`, `run`, `submit`) and when the actor starts.
//
// Keys: out; model, target_config, seed, max_tokens, layers, num_context_layers (the frozen
// target, target_model.h); data and the data-source keys (actors/data/source_keys.h); doc_len,
// batches_per_epoch, noise (data = "synthetic", synthetic_source.h).
//
// Thread-safety: the table is immutable; ParseTargetSettings is reentrant.
#pragma once

#include <string>

#include "actors/dflash/synthetic_source.h"
#include "actors/dflash/target_model.h"
#include "runtime/actor/config_keys.h"

namespace tandem::dflash {

struct TargetSettings {
  std::string out;              // channel the HiddenBatches go to
  TargetModelSpec model;        // which target, its config, captured layers, max_tokens
  std::string data;             // "synthetic", or a file for actors/data's MakeBatchSource
  SyntheticOptions synthetic;   // when data = "synthetic" (vocab, max_tokens, seed filled in)
  ConfigValue source_section;   // the section with declared defaults, for data::MakeBatchSource
};

const KeyTable& TargetKeys();
// A KeyTable device check: InvalidArgument naming `prefix`.`key` when that key is "fp8" and
// `gpu` has no FP8 tensor cores (below sm_90); OK otherwise (also when the key is absent).
Status CheckFp8Gpu(const ConfigValue& section, std::string_view prefix, std::string_view key,
                   const PlacedGpu& gpu);

// The model keys of a dflash.target section (model, target_config, seed, max_tokens, layers,
// num_context_layers): the config loads from `model` (an HF directory) or is built from
// target_config (model = "random"), and its model_type picks the family (qwen3_5 /
// qwen3_5_text: the hybrid, models/qwen3_5); the layers must exist in it; `precision` is
// "bf16" (default) or "fp8" (block-scaled e4m3 projections, sm_90+, both families; an
// official FP8 checkpoint of either family is dequantized at load with either precision,
// docs/fp8.md). Also what the drafter and the pipeline bench read from the target's
// section.
Result<TargetModelSpec> ParseTargetModelSpec(const ConfigValue& section, int64_t job_seed);

// `section` checked against TargetKeys() (plus the group keys) and parsed; also the checks
// that need more than one key: the model's config loads (or target_config builds one), the
// layers exist in it, doc_len fits max_tokens, a data file exists.
Result<TargetSettings> ParseTargetSettings(const ConfigValue& section, const SectionContext& ctx);

}  // namespace tandem::dflash
