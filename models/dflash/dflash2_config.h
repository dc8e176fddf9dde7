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
// ParseDFlashConfig (dflash_config.h) reads a DFlash2 config through ParseDFlash2Config, so
// every path that trains or warm-starts a drafter accepts one; the result is a DFlashConfig
// with `dflash2` set. is_causal follows DFlash's rule (dflash_config.h), as z-lab's loader
// reads it: absent, sliding layers causal and full layers bidirectional; the released
// DFlash2 configs set it false (every layer bidirectional inside the block), and so does a
// job that trains one (actors/dflash/drafter_settings.h). docs/dflash2.md.
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

// InvalidArgument naming `source` and the key: a config not naming DFlash2 (IsDFlash2Config),
// a missing conv_kernel_size / conv_group_size / selector_rank / selector_top_k, a
// conv_group_size that does not divide hidden_size, a selector_top_k above vocab_size, a
// non-positive or non-finite multiplier / scale, a negative soft cap, or any error of the
// shared keys (ParseDFlashSharedConfig).
// The result is a DFlashConfig with `dflash2` set.
Result<DFlashConfig> ParseDFlash2Config(const nlohmann::json& j, std::string_view source);
Result<DFlashConfig> ParseDFlash2ConfigText(std::string_view text, std::string_view source);
// `path` is a config.json or a directory holding one.
Result<DFlashConfig> LoadDFlash2Config(const std::string& path);

// Writes the extension into a DFlash config's JSON `j` (DFlashConfigToJson): architectures
// ["DFlash2DraftModel"], drafter_type "dflash2" and the keys in dflash_config (the soft cap
// only when set).
void AddDFlash2Keys(const DFlash2Extension& e, nlohmann::json* j);

}  // namespace tandem::models
