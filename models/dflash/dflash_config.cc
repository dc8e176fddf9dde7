#include "models/dflash/dflash_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/dflash/dflash2_config.h"
#include "models/io/file_util.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;
using config_detail::GetInt;
using config_detail::GetIntList;

constexpr std::string_view kArchitecture = "DFlashDraftModel";
constexpr std::string_view kDFlash2Architecture = "DFlash2DraftModel";
// Keys only a DFlash2 config has (dflash2_config.h).
constexpr const char* kDFlash2OnlyKeys[] = {"conv_kernel_size", "conv_group_size",
                                            "selector_rank", "selector_top_k"};

// vLLM's capture ids: target_layer_ids + 1. vLLM numbers a captured hidden state by the
// layer it enters (0 = the embedding), DFlash by the layer whose output it is
// (vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py, get_eagle3_aux_layers_from_config;
// vllm/transformers_utils/configs/eagle.py, EAGLEConfig._normalize_dflash_layer_ids).
std::vector<int64_t> AuxLayerIds(const std::vector<int64_t>& target_layer_ids) {
  std::vector<int64_t> aux;
  for (int64_t id : target_layer_ids) aux.push_back(id + 1);
  return aux;
}

// An eagle_aux_hidden_state_layer_ids key, when given, must be target_layer_ids + 1 (vLLM
// refuses a config where they disagree).
Status CheckAuxLayerIds(const json& j, std::string_view source,
                        const std::vector<int64_t>& target_layer_ids) {
  constexpr const char* kKey = "eagle_aux_hidden_state_layer_ids";
  if (!j.contains(kKey) || j[kKey].is_null()) return Status::Ok();
  ASSIGN_OR_RETURN(std::vector<int64_t> aux, GetIntList(j, source, kKey));
  if (aux != AuxLayerIds(target_layer_ids)) {
    return InvalidArgumentError("{}: key '{}': {} must be dflash_config.target_layer_ids {} + 1",
                                source, kKey, DescribeJson(json(aux)), DescribeJson(json(target_layer_ids)));
  }
  return Status::Ok();
}

// is_causal at the top level (z-lab's loader, vLLM); vLLM also reads dflash_config.causal
// when is_causal is absent, so a config where the two disagree, or with only the nested key,
// would be served with a mask z-lab's loader does not give: refused.
Status ParseIsCausal(const json& j, const json& dc, std::string_view source, DFlashConfig* c) {
  auto it = j.find("is_causal");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_boolean())
      return InvalidArgumentError("{}: key 'is_causal': expected true or false, got {}", source,
                                  DescribeJson(*it));
    c->is_causal = it->get<bool>();
  }
  auto nested = dc.find("causal");
  if (nested != dc.end() && !nested->is_null() &&
      (!nested->is_boolean() || !c->is_causal || nested->get<bool>() != *c->is_causal))
    return InvalidArgumentError("{}: key 'dflash_config.causal': {} must repeat the top-level "
                                "is_causal (z-lab's loader reads only is_causal); set "
                                "is_causal", source, DescribeJson(*nested));
  return Status::Ok();
}

}  // namespace

bool DFlashLayerCausal(const DFlashConfig& c, int64_t l) {
  return c.is_causal.value_or(c.layers.layer_types.at(static_cast<size_t>(l)) ==
                              LayerType::kSlidingAttention);
}

Status CheckDFlashMask(const DFlashConfig& c, std::string_view source) {
  if (c.is_causal.value_or(true)) return Status::Ok();  // absent: sliding layers causal
  const auto& types = c.layers.layer_types;
  const bool sliding = std::find(types.begin(), types.end(), LayerType::kSlidingAttention) !=
                       types.end();
  if (sliding && c.layers.sliding_window && *c.layers.sliding_window < c.block_size)
    return InvalidArgumentError(
        "{}: key 'is_causal': false with sliding_window {} < block_size {}: a bidirectional "
        "sliding layer would be served with the window bounding block keys after the query "
        "too, which tandem's block attention does not train; use sliding_window >= {} or "
        "drop is_causal", source, *c.layers.sliding_window, c.block_size, c.block_size);
  return Status::Ok();
}

std::vector<int64_t> DFlashTargetLayerIds(int64_t num_target_layers, int64_t num_context_layers) {
  TANDEM_CHECK_MSG(num_target_layers >= 5 && num_context_layers >= 1,
                   "DFlashTargetLayerIds({}, {})", num_target_layers, num_context_layers);
  if (num_context_layers == 1) return {num_target_layers / 2};
  std::vector<int64_t> ids;
  const int64_t span = num_target_layers - 4;  // from layer 1 to layer n-3
  for (int64_t i = 0; i < num_context_layers; ++i) {
    // Same float expression as the reference; nearbyint under the default rounding mode
    // rounds halves to even, as Python's round() does.
    double x = 1.0 + static_cast<double>(i * span) / static_cast<double>(num_context_layers - 1);
    ids.push_back(static_cast<int64_t>(std::nearbyint(x)));
  }
  return ids;
}

bool IsDFlash2Config(const json& j) {
  if (!j.is_object()) return false;
  auto arch = j.find("architectures");
  if (arch != j.end() && arch->is_array()) {
    for (const json& a : *arch)
      if (a.is_string() && a.get<std::string>() == kDFlash2Architecture) return true;
  }
  auto type_is_dflash2 = [](const json& o) {
    auto t = o.find("drafter_type");
    return t != o.end() && t->is_string() && t->get<std::string>() == "dflash2";
  };
  if (type_is_dflash2(j)) return true;
  auto dc = j.find("dflash_config");
  return dc != j.end() && dc->is_object() && type_is_dflash2(*dc);
}

Result<DFlashConfig> ParseDFlashConfig(const json& j, std::string_view source) {
  if (!j.is_object()) return InvalidArgumentError("{}: expected a JSON object", source);
  if (IsDFlash2Config(j)) return ParseDFlash2Config(j, source);
  auto dc = j.find("dflash_config");
  for (const char* key : kDFlash2OnlyKeys) {
    const bool top = j.contains(key) && !j[key].is_null();
    const bool inner = dc != j.end() && dc->is_object() && dc->contains(key) &&
                       !(*dc)[key].is_null();
    if (top || inner)
      return InvalidArgumentError(
          "{}: key '{}{}': a DFlash2 key in a config whose architectures is [\"{}\"]; a DFlash2 "
          "drafter names [\"{}\"]",
          source, inner ? "dflash_config." : "", key, kArchitecture, kDFlash2Architecture);
  }
  return ParseDFlashSharedConfig(j, source, kArchitecture);
}

Result<DFlashConfig> ParseDFlashSharedConfig(const json& j, std::string_view source,
                                             std::string_view architecture) {
  if (!j.is_object()) return InvalidArgumentError("{}: expected a JSON object", source);
  DFlashConfig c;
  ASSIGN_OR_RETURN(c.layers, ParseTransformerConfig(j, source));
  if (c.layers.family != ModelFamily::kQwen3) {
    return InvalidArgumentError("{}: key 'model_type': a DFlash drafter uses qwen3 layers, got "
                                "'{}'", source, c.layers.model_type);
  }
  if (c.layers.architectures != std::vector<std::string>{std::string(architecture)}) {
    return InvalidArgumentError("{}: key 'architectures': expected [\"{}\"]", source,
                                architecture);
  }
  auto dc = j.find("dflash_config");
  if (dc == j.end() || !dc->is_object()) {
    return InvalidArgumentError("{}: key 'dflash_config': missing or not an object", source);
  }
  ASSIGN_OR_RETURN(c.mask_token_id, GetInt(*dc, source, "mask_token_id"));
  ASSIGN_OR_RETURN(c.target_layer_ids, GetIntList(*dc, source, "target_layer_ids"));
  // block_size sits at the top level in z-lab's configs and inside dflash_config in some
  // later ones; both must agree when both are given.
  const bool top = j.contains("block_size") && !j["block_size"].is_null();
  const bool inner = dc->contains("block_size") && !(*dc)["block_size"].is_null();
  if (!top && !inner) return InvalidArgumentError("{}: key 'block_size': missing", source);
  if (top) {
    ASSIGN_OR_RETURN(c.block_size, GetInt(j, source, "block_size"));
  }
  if (inner) {
    ASSIGN_OR_RETURN(int64_t b, GetInt(*dc, source, "block_size"));
    if (top && b != c.block_size) {
      return InvalidArgumentError("{}: key 'dflash_config.block_size': {} disagrees with "
                                  "block_size {}", source, b, c.block_size);
    }
    c.block_size = b;
  }
  if (c.block_size < 2) {
    return InvalidArgumentError("{}: key 'block_size': must be at least 2, got {}", source,
                                c.block_size);
  }
  if (c.mask_token_id < 0 || c.mask_token_id >= c.layers.vocab_size) {
    return InvalidArgumentError("{}: key 'dflash_config.mask_token_id': {} is outside the "
                                "vocabulary of {}", source, c.mask_token_id, c.layers.vocab_size);
  }
  if (c.target_layer_ids.empty()) {
    return InvalidArgumentError("{}: key 'dflash_config.target_layer_ids': empty", source);
  }
  ASSIGN_OR_RETURN(c.num_target_layers, GetInt(j, source, "num_target_layers", 0));
  for (size_t i = 0; i < c.target_layer_ids.size(); ++i) {
    const int64_t id = c.target_layer_ids[i];
    const bool in_range = id >= 0 && (c.num_target_layers == 0 || id < c.num_target_layers);
    if (!in_range || (i > 0 && id <= c.target_layer_ids[i - 1])) {
      return InvalidArgumentError("{}: key 'dflash_config.target_layer_ids': {} must be "
                                  "increasing layer ids below num_target_layers {}", source,
                                  DescribeJson(json(c.target_layer_ids)), c.num_target_layers);
    }
  }
  RETURN_IF_ERROR(CheckAuxLayerIds(j, source, c.target_layer_ids));
  RETURN_IF_ERROR(ParseIsCausal(j, *dc, source, &c));
  RETURN_IF_ERROR(CheckDFlashMask(c, source));
  return c;
}

Result<DFlashConfig> ParseDFlashConfigText(std::string_view text, std::string_view source) {
  ASSIGN_OR_RETURN(const json j, ParseJson(text, source));
  return ParseDFlashConfig(j, source);
}

Result<DFlashConfig> LoadDFlashConfig(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) file = (std::filesystem::path(path) / "config.json").string();
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(file));
  return ParseDFlashConfigText(text, file);
}

json DFlashConfigToJson(const DFlashConfig& c) {
  TransformerConfig layers = c.layers;
  layers.architectures = {std::string(c.dflash2 ? kDFlash2Architecture : kArchitecture)};
  layers.model_type = "qwen3";
  json j = TransformerConfigToJson(layers);
  // block_size at the top level (z-lab's layout) and inside dflash_config (newer loaders
  // read it there first: SGLang's parse_dflash_draft_config).
  j["block_size"] = c.block_size;
  if (c.num_target_layers > 0) j["num_target_layers"] = c.num_target_layers;
  j["dflash_config"] = {{"mask_token_id", c.mask_token_id},
                        {"target_layer_ids", c.target_layer_ids},
                        {"block_size", c.block_size}};
  // vLLM versions that read only this key (not dflash_config) need it to capture the right
  // target layers.
  j["eagle_aux_hidden_state_layer_ids"] = AuxLayerIds(c.target_layer_ids);
  // Only when set: without it every reader applies the per-layer rule tandem trained with.
  if (c.is_causal) j["is_causal"] = *c.is_causal;
  if (c.dflash2) AddDFlash2Keys(*c.dflash2, &j);
  return j;
}

Status WriteDFlashConfig(const std::string& path, const DFlashConfig& c) {
  return WriteFileAtomically(path, DFlashConfigToJson(c).dump(2) + "\n");
}

}  // namespace tandem::models
