// Settings of a dflash.drafter group, declared once (DrafterKeys: name, type, range, default,
// doc) and parsed and validated in one place (ParseDrafterSettings), both when the job is
// checked (`tandem validate`, `run`, `submit`) and when the actor starts, so a bad value is
// refused before any work starts and every default exists once.
//
// Beyond each key's own type and range, the parse checks what spans keys or groups:
// total_steps >= max_steps; layer_types has num_layers entries and sliding_window > 0 exactly
// when one is sliding; is_causal = false needs sliding_window >= block_size when a layer is
// sliding (CheckDFlashMask); anchors_per_sequence <= anchors_per_batch; `target` names a
// dflash.target group, whose config gives the vocab that mask_token_id must fall in;
// init_from holds a drafter checkpoint whose config is the drafter this group trains; max_seconds needs replicas = 1; metrics_file's directory
// exists; checkpoint.dir is not a file; drafter_type = "dflash2" for any DFlash2 key,
// conv_group_size dividing the target's hidden_size, conv_kernel_size <= block_size,
// selector_top_k <= the target's vocab (its key range, 1 .. 64, and selector_rank's, 1 ..
// 2048, are the selector kernels' limits), and no lm_head_precision = "fp8" with a DFlash2
// drafter (no logit transform or top-k there); the `eval` table's own checks
// (drafter_eval_settings.h). Without `pinned_bytes` the group's pinned memory is what its
// asynchronous checkpoint snapshot needs (DefaultDrafterPinnedBytes).
//
// Thread-safety: the table is immutable; ParseDrafterSettings is reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/drafter_eval_settings.h"
#include "actors/dflash/target_model.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_trainer.h"
#include "models/io/hf_config.h"
#include "runtime/actor/config_keys.h"

namespace tandem::dflash {

struct DrafterSettings {
  std::string in;                 // channel of HiddenBatches
  std::string target_group;       // the dflash.target group trained against
  TargetModelSpec target;         // that group's model (config, captured layers, max_tokens)
  int nranks = 1;                 // replicas of this group (data parallel)
  int64_t num_layers = 0;
  std::vector<models::LayerType> layer_types;  // num_layers entries
  int64_t sliding_window = 0;     // > 0 exactly when a layer is sliding
  // The drafter layers' attention shape (0: the target's; a hybrid target's is its gated
  // attention's). The public Qwen3.5/3.6-27B drafters use 32 / 8 heads of 128.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t mask_token_id = 0;      // in [0, target vocab)
  int64_t max_steps = 0;
  int64_t total_steps = 0;        // LR schedule length, >= max_steps
  int64_t anchors_per_batch = 0;     // the step's blocks
  int64_t anchors_per_sequence = 0;  // > 0: at most this many per document
  double loss_decay = 0;             // gamma of the slot weights exp(-(j-1)/gamma)
  std::optional<bool> is_causal;     // the drafter config's is_causal (absent: per layer)
  // drafter_type = "dflash2": the DFlash2 extension (its is_causal defaults to false).
  std::optional<models::DFlash2Extension> dflash2;
  double selector_loss_weight = 1.0;  // alpha of loss = DFlash loss + alpha * selector loss
  std::string init_from;             // "" = random init; else a drafter checkpoint directory
  double lr = 0;
  double warmup_ratio = 0;
  double grad_clip = 0;
  double noise_std = 0;
  bool optimizer_overlap = false; // AdamW on a second stream, overlapping the next forward
  bool lm_head_fp8 = false;       // lm_head_precision = "fp8"
  uint64_t seed = 0;
  int64_t log_every = 0;
  int64_t max_bad_steps = 0;
  ResumeMode resume = ResumeMode::kOff;  // resume: false, true or "force"
  std::string metrics_file;       // "" = none
  double max_seconds = 0;         // 0 = no limit
  std::string checkpoint_dir;     // "" = no checkpoints
  int64_t checkpoint_every = 0;   // 0 = only at the end
  bool checkpoint_async = true;   // snapshot + background write (drafter_checkpointer.h)
  int64_t checkpoint_keep_last = 0;  // 0: keep all (checkpoint_retention.h)
  EvalSettings eval;              // the `eval` table: tau by speculative decoding
};

const KeyTable& DrafterKeys();

Result<DrafterSettings> ParseDrafterSettings(const ConfigValue& section,
                                             const SectionContext& ctx);

// The drafter's model config: the target's layer shapes (`spec`), `num_layers` of them, with
// the settings' attention pattern and the target's layers as context.
models::DFlashConfig DrafterConfig(const DrafterSettings& ds, const TargetModelSpec& spec);

// The trainer's options from the settings (the target's max_tokens; the LR schedule, anchors,
// loss decay, noise, clip, seed and head precision of the group).
models::DFlashTrainOptions DrafterTrainOptions(const DrafterSettings& ds,
                                               const TargetModelSpec& spec);

// Pinned host memory per replica when the group sets no `pinned_bytes`: the asynchronous
// checkpoints' snapshot (DFlashHostState::Bytes of the drafter, 14 bytes per parameter) when
// checkpoints are on and async, else 0. DrafterKeys' pinned default, so the job's resource
// check counts it (runtime/job/runner.cc PlaceOn).
uint64_t DefaultDrafterPinnedBytes(const DrafterSettings& ds);

}  // namespace tandem::dflash
