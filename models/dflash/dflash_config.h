// The DFlash drafter's HF-style config.json, as the public trainers (SpecForge,
// speculators) and servers (SGLang, vLLM) write and read it:
//   architectures ["DFlashDraftModel"], model_type "qwen3" + the Qwen3 fields of the
//   drafter's own layers, block_size, num_target_layers, layer_types, sliding_window,
//   dflash_config {mask_token_id, target_layer_ids, block_size},
//   eagle_aux_hidden_state_layer_ids (= target_layer_ids + 1, vLLM's numbering),
//   and is_causal only when the config had it.
// A DFlash2 drafter (dflash2_config.h, docs/dflash2.md) is the same config under
// architectures ["DFlash2DraftModel"] with its extension keys in dflash_config: one config
// type, DFlashConfig with `dflash2` set, flows through every path (parameters, drafter,
// checkpoints, warm start, trainer, actors).
// vocab_size and max_position_embeddings are the target's (the drafter actor copies the
// target's layer config): SGLang refuses a draft whose context is shorter than the target's.
// dflash_config_loaders_test.cc reads a written config rule by rule as SGLang and vLLM do.
// Also the default rule choosing which target layers feed the drafter, and the mask rule:
// which layers attend causally inside the block.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/io/hf_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

// DFlash2's keys (dflash2_config.h): the grouped dynamic convolution around attention and
// the MLP, the candidate selector, and the logit transform.
struct DFlash2Extension {
  int64_t conv_kernel_size = 0;  // taps: output t reads inputs t, t-1, .., t-(K-1) of its block
  int64_t conv_group_size = 0;   // channels sharing one dynamic weight; divides hidden_size
  int64_t selector_rank = 0;     // rank of the codebooks and of the hidden projection
  int64_t selector_top_k = 0;    // candidates per draft position, <= vocab_size
  double output_multiplier = 1.0;
  std::optional<double> final_logit_softcapping;  // > 0 when set
  double input_embedding_scale = 1.0;
  int64_t conv_groups(int64_t hidden) const { return hidden / conv_group_size; }
  bool operator==(const DFlash2Extension&) const = default;
};

struct DFlashConfig {
  TransformerConfig layers;  // the drafter's decoder layers (family kQwen3)
  int64_t block_size = 16;   // slot 0 = anchor token, slots 1.. = mask token
  int64_t mask_token_id = 0;
  int64_t num_target_layers = 0;          // the target's depth
  std::vector<int64_t> target_layer_ids;  // layer i = output of target decoder layer i
  // The config's `is_causal`, read as z-lab's loader reads it. Absent: each layer's own rule
  // (sliding layers causal inside the block, full layers bidirectional). Present: every
  // layer causal inside the block (true) or bidirectional (false); the window stays per
  // layer, from layer_types and sliding_window.
  std::optional<bool> is_causal;
  // Set for a DFlash2 drafter (architectures ["DFlash2DraftModel"]).
  std::optional<DFlash2Extension> dflash2;
};

// Whether layer l attends causally inside its block (the rule above, for DFlash and DFlash2
// alike, as z-lab's loader reads both).
bool DFlashLayerCausal(const DFlashConfig& c, int64_t l);

// The masks tandem's block attention trains: InvalidArgument naming `source` and the key
// otherwise. A bidirectional sliding layer (is_causal false) needs sliding_window >=
// block_size: servers bound the window on both sides of a query, so a shorter window would
// hide block keys after the query, and the kernels bound it on the earlier side only.
Status CheckDFlashMask(const DFlashConfig& c, std::string_view source);

// The DFlash rule for k context layers out of a target of n layers, as in z-lab's
// reference `build_target_layer_ids`: k == 1 -> [n / 2]; otherwise
// round(1 + i * (n - 4) / (k - 1)) for i in [0, k), rounding halves to even like Python.
// E.g. n = 36, k = 5 -> [1, 9, 17, 25, 33]. REQUIRES: n >= 5, 1 <= k.
std::vector<int64_t> DFlashTargetLayerIds(int64_t num_target_layers, int64_t num_context_layers);

// InvalidArgument naming `source` and the key for a wrong or unsupported value (also an
// eagle_aux_hidden_state_layer_ids that is not target_layer_ids + 1). A DFlash2 config
// (IsDFlash2Config) is read by ParseDFlash2Config (dflash2_config.h) and returned with
// `dflash2` set; a DFlash config carrying a DFlash2-only key (conv_kernel_size,
// conv_group_size, selector_rank, selector_top_k) is refused: no silent fallback to DFlash.
// Jobs' init_from, checkpoint resume and `tandem eval` all read drafters through this (eval
// refuses a DFlash2 drafter itself: its proposals need the selector).
Result<DFlashConfig> ParseDFlashConfig(const nlohmann::json& j, std::string_view source);
// Whether `j` names a DFlash2 drafter: architectures containing "DFlash2DraftModel", or
// drafter_type "dflash2" at the top level or inside dflash_config.
bool IsDFlash2Config(const nlohmann::json& j);
// The keys DFlash and DFlash2 share, for a config whose architectures must be
// [`architecture`]; ParseDFlashConfig and ParseDFlash2Config (dflash2_config.h) build on it.
Result<DFlashConfig> ParseDFlashSharedConfig(const nlohmann::json& j, std::string_view source,
                                             std::string_view architecture);
Result<DFlashConfig> ParseDFlashConfigText(std::string_view text, std::string_view source);
// `path` is a config.json or a directory holding one.
Result<DFlashConfig> LoadDFlashConfig(const std::string& path);

// A DFlash2 config (`dflash2` set) is written under architectures ["DFlash2DraftModel"] with
// drafter_type "dflash2" and its keys in dflash_config.
nlohmann::json DFlashConfigToJson(const DFlashConfig& c);
// Writes `path` (a config.json) atomically.
Status WriteDFlashConfig(const std::string& path, const DFlashConfig& c);

}  // namespace tandem::models
