// Warm start: training a drafter from the weights of a released or exported one (z-lab's
// layout, which tandem's checkpoints also have: config.json + model.safetensors) rather than
// from random weights. The checkpoint's config must describe the drafter being trained; the
// first field that differs is reported so the caller can name the setting to change.
//
// Thread-safety: pure functions; LoadDFlashWeights' contract for the load.
#pragma once

#include <optional>
#include <string>

#include "models/dflash/dflash_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct DFlashConfigMismatch {
  std::string key;    // the config.json key ("num_hidden_layers", "dflash_config.mask_token_id")
  std::string have;   // the checkpoint's value
  std::string want;   // the drafter's
  // vocab_size or hidden_size: the checkpoint drafts for another target.
  bool other_target = false;
};

// The first field of `have` (a checkpoint's config) that differs from `want` (the drafter to
// train) among those that shape its weights or its computation: vocab and hidden size, layer
// count, heads, head and MLP dims, layer types, window, mask rule, block size, mask token,
// target layers, RoPE theta, RMSNorm epsilon, the architecture (DFlash or DFlash2) and a
// DFlash2 drafter's convolution, selector and logit-transform keys. std::nullopt when they
// all agree.
std::optional<DFlashConfigMismatch> FindDFlashConfigMismatch(const DFlashConfig& have,
                                                             const DFlashConfig& want);

}  // namespace tandem::models
