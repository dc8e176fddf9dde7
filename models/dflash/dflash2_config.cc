#include "models/dflash/dflash2_config.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/io/file_util.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

constexpr std::string_view kArchitecture = "DFlash2DraftModel";

// The value of a DFlash2 key: dflash_config's, else the top level's, else null. Both present
// and different: refused (a reader taking the other one would build another model).
Result<json> FindKey(const json& j, std::string_view source, const char* key) {
  const json* inner = nullptr;
  auto dc = j.find("dflash_config");
  if (dc != j.end() && dc->is_object()) {
    auto it = dc->find(key);
    if (it != dc->end() && !it->is_null()) inner = &*it;
  }
  const json* top = nullptr;
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) top = &*it;
  if (inner != nullptr && top != nullptr && *inner != *top)
    return InvalidArgumentError("{}: key 'dflash_config.{}': {} disagrees with the top-level "
                                "{} {}", source, key, DescribeJson(*inner), key,
                                DescribeJson(*top));
  if (inner != nullptr) return *inner;
  if (top != nullptr) return *top;
  return json();
}

Result<int64_t> RequiredPositiveInt(const json& j, std::string_view source, const char* key) {
  ASSIGN_OR_RETURN(const json v, FindKey(j, source, key));
  if (v.is_null())
    return InvalidArgumentError("{}: key 'dflash_config.{}': missing (a DFlash2 drafter needs "
                                "it)", source, key);
  if (!v.is_number_integer() || v.get<int64_t>() < 1)
    return InvalidArgumentError("{}: key 'dflash_config.{}': expected a positive integer, got "
                                "{}", source, key, DescribeJson(v));
  return v.get<int64_t>();
}

// A number with a default when absent or null.
Result<double> OptionalNumber(const json& j, std::string_view source, const char* key,
                              double fallback) {
  ASSIGN_OR_RETURN(const json v, FindKey(j, source, key));
  if (v.is_null()) return fallback;
  if (!v.is_number())
    return InvalidArgumentError("{}: key '{}': expected a number, got {}", source, key,
                                DescribeJson(v));
  return v.get<double>();
}

}  // namespace

Result<DFlashConfig> ParseDFlash2Config(const json& j, std::string_view source) {
  if (!j.is_object()) return InvalidArgumentError("{}: expected a JSON object", source);
  if (!IsDFlash2Config(j))
    return InvalidArgumentError("{}: key 'architectures': expected [\"{}\"] for a DFlash2 "
                                "drafter", source, kArchitecture);
  // drafter_type, when given, must say dflash2 too (IsDFlash2Config accepts either signal).
  for (const json* o : {&j, j.contains("dflash_config") ? &j["dflash_config"] : nullptr}) {
    if (o == nullptr || !o->is_object()) continue;
    auto t = o->find("drafter_type");
    if (t != o->end() && !t->is_null() && (!t->is_string() || t->get<std::string>() != "dflash2"))
      return InvalidArgumentError("{}: key '{}drafter_type': {} in a DFlash2 config; expected "
                                  "\"dflash2\"", source, o == &j ? "" : "dflash_config.",
                                  DescribeJson(*t));
  }
  ASSIGN_OR_RETURN(DFlashConfig base, ParseDFlashSharedConfig(j, source, kArchitecture));
  DFlash2Extension c;
  ASSIGN_OR_RETURN(c.conv_kernel_size, RequiredPositiveInt(j, source, "conv_kernel_size"));
  ASSIGN_OR_RETURN(c.conv_group_size, RequiredPositiveInt(j, source, "conv_group_size"));
  ASSIGN_OR_RETURN(c.selector_rank, RequiredPositiveInt(j, source, "selector_rank"));
  ASSIGN_OR_RETURN(c.selector_top_k, RequiredPositiveInt(j, source, "selector_top_k"));
  const int64_t hidden = base.layers.hidden_size;
  if (hidden % c.conv_group_size != 0)
    return InvalidArgumentError("{}: key 'dflash_config.conv_group_size': {} does not divide "
                                "hidden_size {} (the convolution shares one dynamic weight per "
                                "group of channels)", source, c.conv_group_size, hidden);
  if (c.selector_top_k > base.layers.vocab_size)
    return InvalidArgumentError("{}: key 'dflash_config.selector_top_k': {} exceeds vocab_size "
                                "{}", source, c.selector_top_k, base.layers.vocab_size);
  ASSIGN_OR_RETURN(c.output_multiplier, OptionalNumber(j, source, "output_multiplier", 1.0));
  if (!std::isfinite(c.output_multiplier) || c.output_multiplier <= 0)
    return InvalidArgumentError("{}: key 'output_multiplier': expected a finite number > 0, got "
                                "{}", source, c.output_multiplier);
  ASSIGN_OR_RETURN(c.input_embedding_scale,
                   OptionalNumber(j, source, "input_embedding_scale", 1.0));
  if (!std::isfinite(c.input_embedding_scale) || c.input_embedding_scale <= 0)
    return InvalidArgumentError("{}: key 'input_embedding_scale': expected a finite number > "
                                "0, got {}", source, c.input_embedding_scale);
  // The reference applies the cap only when it is set and > 0; 0 reads as "no cap" too.
  ASSIGN_OR_RETURN(const double cap, OptionalNumber(j, source, "final_logit_softcapping", 0.0));
  if (!std::isfinite(cap) || cap < 0)
    return InvalidArgumentError("{}: key 'final_logit_softcapping': expected null, 0 (no cap) "
                                "or a finite number > 0, got {}", source, cap);
  if (cap > 0) c.final_logit_softcapping = cap;
  // is_causal as z-lab's loader reads it for DFlash2 too: absent, each layer's own rule
  // (the released DFlash2 configs set it false).
  base.dflash2 = c;
  RETURN_IF_ERROR(CheckDFlashMask(base, source));
  return base;
}

void AddDFlash2Keys(const DFlash2Extension& e, json* j) {
  (*j)["architectures"] = {std::string(kArchitecture)};
  json& dc = (*j)["dflash_config"];
  dc["drafter_type"] = "dflash2";
  dc["conv_kernel_size"] = e.conv_kernel_size;
  dc["conv_group_size"] = e.conv_group_size;
  dc["selector_rank"] = e.selector_rank;
  dc["selector_top_k"] = e.selector_top_k;
  dc["output_multiplier"] = e.output_multiplier;
  dc["input_embedding_scale"] = e.input_embedding_scale;
  if (e.final_logit_softcapping) dc["final_logit_softcapping"] = *e.final_logit_softcapping;
}

Result<DFlashConfig> ParseDFlash2ConfigText(std::string_view text, std::string_view source) {
  ASSIGN_OR_RETURN(const json j, ParseJson(text, source));
  return ParseDFlash2Config(j, source);
}

Result<DFlashConfig> LoadDFlash2Config(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path))
    file = (std::filesystem::path(path) / "config.json").string();
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(file));
  return ParseDFlash2ConfigText(text, file);
}

}  // namespace tandem::models
