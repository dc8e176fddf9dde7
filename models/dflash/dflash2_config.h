// The DFlash2 drafter's config.json, read as z-lab's DFlash2 loader and the released
// trainers (SpecForge, speculators) read it: everything DFlash has (dflash_config.h) under
// architectures ["DFlash2DraftModel"], plus
//   conv_kernel_size, conv_group_size   the grouped dynamic causal convolution around
//                                       attention and around the MLP of each layer
//                                       (kernels/dflash2/grouped_dynamic_conv.h);
//   selector_rank, selector_top_k       the low-rank candidate selector
//                                       (kernels/dflash2/candidate_selector.h);
//   output_multiplier (default 1), final_logit_softcapping (absent, null or 0: none),
//   input_embedding_scale (default 1)   logits = cap * tanh(lm_head(h) * m / cap) and the
//                                       noise embeddings scaled before layer 0
//                                       (kernels/dflash2/logit_softcap.h).
// Each DFlash2 key is read from dflash_config first (where the trainers write it) and then
// from the top level; when both are present they must agree.
// Only the config is read: DFlash2 training and decoding are not implemented yet, and every
// path that trains, warm-starts or evaluates a drafter refuses a DFlash2 config
// (ParseDFlashConfig). docs/dflash2.md.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "models/dflash/dflash_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct DFlash2Config {
  DFlashConfig base;  // the keys shared with DFlash (its layers, block, mask, target layers)
  int64_t conv_kernel_size = 0;  // taps: output t reads inputs t, t-1, .., t-(K-1) of its block
  int64_t conv_group_size = 0;   // channels sharing one dynamic weight; divides hidden_size
  int64_t selector_rank = 0;     // rank of the codebooks and of the hidden projection
  int64_t selector_top_k = 0;    // candidates per draft position, <= vocab_size
  double output_multiplier = 1.0;
  std::optional<double> final_logit_softcapping;  // > 0 when set
  double input_embedding_scale = 1.0;
};

// InvalidArgument naming `source` and the key: a config not naming DFlash2 (IsDFlash2Config),
// a missing conv_kernel_size / conv_group_size / selector_rank / selector_top_k, a
// conv_group_size that does not divide hidden_size, a selector_top_k above vocab_size, a
// non-positive or non-finite multiplier / scale, a negative soft cap, or any error of the
// shared keys (ParseDFlashSharedConfig).
Result<DFlash2Config> ParseDFlash2Config(const nlohmann::json& j, std::string_view source);
Result<DFlash2Config> ParseDFlash2ConfigText(std::string_view text, std::string_view source);
// `path` is a config.json or a directory holding one.
Result<DFlash2Config> LoadDFlash2Config(const std::string& path);

}  // namespace tandem::models
