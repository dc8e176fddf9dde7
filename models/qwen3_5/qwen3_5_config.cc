#include "models/qwen3_5/qwen3_5_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/io/file_util.h"
#include "models/io/hf_config.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// The text fields' object and how keys are named in messages ("text_config.x" or "x").
struct Scope {
  const json& j;
  std::string_view source;
  std::string prefix;
  std::string Key(std::string_view k) const { return prefix + std::string(k); }
};

template <typename... Args>
Status KeyError(const Scope& s, std::string_view key, fmt::format_string<Args...> f,
                Args&&... args) {
  return InvalidArgumentError("{}: key '{}': {}", s.source, s.Key(key),
                              fmt::format(f, std::forward<Args>(args)...));
}

const json* Find(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Result<int64_t> PositiveInt(const Scope& s, const char* key,
                            std::optional<int64_t> fallback = std::nullopt) {
  const json* v = Find(s.j, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return KeyError(s, key, "missing");
  }
  if (!v->is_number_integer() || v->get<int64_t>() <= 0)
    return KeyError(s, key, "expected a positive integer, got {}", DescribeJson(*v));
  return v->get<int64_t>();
}

Result<double> Number(const Scope& s, const json& obj, const char* key, std::string_view shown,
                      std::optional<double> fallback) {
  const json* v = Find(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return KeyError(s, shown, "missing");
  }
  if (!v->is_number() || !std::isfinite(v->get<double>()))
    return KeyError(s, shown, "expected a number, got {}", DescribeJson(*v));
  return v->get<double>();
}

Result<bool> Bool(const Scope& s, const json& obj, const char* key, bool fallback) {
  const json* v = Find(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return KeyError(s, key, "expected true or false, got {}", DescribeJson(*v));
  return v->get<bool>();
}

// quantization_config (the official FP8 checkpoints put it at the top level of the wrapper;
// a text config may hold it too): the FP8 block layout sets c->fp8_block_weights, anything
// else is refused (models/io/hf_config.h).
Status ParseQuantized(const Scope& s, Qwen35Config* c) {
  if (Find(s.j, "quantization_config") == nullptr) return Status::Ok();
  bool fp8 = false;
  // Messages read "<file>: key 'quantization_config'" (for a wrapper's text config:
  // "<file> text_config: key ...").
  const std::string where = s.prefix.empty()
                                ? std::string(s.source)
                                : fmt::format("{} {}", s.source, s.prefix.substr(0, s.prefix.size() - 1));
  RETURN_IF_ERROR(ParseFp8QuantizationConfig(s.j, where, &fp8));
  c->fp8_block_weights = c->fp8_block_weights || fp8;
  return Status::Ok();
}

// Values that must hold for the forward tandem implements (`moe`: the MoE model_type).
Status RejectUnsupported(const Scope& s, bool moe) {
  for (const char* key : {"num_experts", "num_local_experts", "moe_intermediate_size"}) {
    if (!moe && Find(s.j, key) != nullptr)
      return KeyError(s, key,
                      "expert keys in a dense hybrid: a mixture-of-experts Qwen3.5 / 3.6 is "
                      "model_type qwen3_5_moe (or qwen3_5_moe_text)");
  }

  if (const json* act = Find(s.j, "hidden_act"); act != nullptr && *act != "silu")
    return KeyError(s, "hidden_act", "{} is not implemented (only \"silu\")", DescribeJson(*act));
  ASSIGN_OR_RETURN(bool bias, Bool(s, s.j, "attention_bias", false));
  if (bias) return KeyError(s, "attention_bias", "attention biases are not implemented");
  ASSIGN_OR_RETURN(bool gate, Bool(s, s.j, "attn_output_gate", true));
  if (!gate)
    return KeyError(s, "attn_output_gate", "an ungated attention output is not implemented");
  return Status::Ok();
}

Status ParseLayerTypes(const Scope& s, Qwen35Config* c) {
  const json* lt = Find(s.j, "layer_types");
  const json* interval = Find(s.j, "full_attention_interval");
  std::optional<int64_t> every;
  if (interval != nullptr) {
    ASSIGN_OR_RETURN(every, PositiveInt(s, "full_attention_interval"));
  }
  c->layer_types.clear();
  if (lt == nullptr) {  // transformers' default: every 4th layer is full attention
    const int64_t n = every.value_or(4);
    for (int64_t i = 0; i < c->num_hidden_layers; ++i)
      c->layer_types.push_back((i + 1) % n == 0 ? HybridLayerType::kFullAttention
                                                : HybridLayerType::kLinearAttention);
    return Status::Ok();
  }
  if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c->num_hidden_layers)
    return KeyError(s, "layer_types", "expected a list of {} layer types (num_hidden_layers)",
                    c->num_hidden_layers);
  for (size_t i = 0; i < lt->size(); ++i) {
    const json& e = (*lt)[i];
    if (e == "linear_attention") {
      c->layer_types.push_back(HybridLayerType::kLinearAttention);
    } else if (e == "full_attention") {
      c->layer_types.push_back(HybridLayerType::kFullAttention);
    } else {
      return KeyError(s, "layer_types",
                      "layer {} is {}; only \"linear_attention\" and "
                      "\"full_attention\" are implemented",
                      i, DescribeJson(e));
    }
    const bool full = (static_cast<int64_t>(i) + 1) % every.value_or(1) == 0;
    if (every && full != (c->layer_types.back() == HybridLayerType::kFullAttention))
      return KeyError(s, "layer_types", "layer {} is {} but full_attention_interval is {}", i,
                      DescribeJson(e), *every);
  }
  return Status::Ok();
}

Status ParseRope(const Scope& s, Qwen35Config* c) {
  const json* rp = Find(s.j, "rope_parameters");
  const char* rp_key = "rope_parameters";
  if (rp == nullptr) {  // transformers 4.x spelling
    rp = Find(s.j, "rope_scaling");
    rp_key = "rope_scaling";
  }
  static const json kEmpty = json::object();
  if (rp != nullptr && !rp->is_object()) return KeyError(s, rp_key, "expected an object");
  const json& p = rp != nullptr ? *rp : kEmpty;
  for (const auto& [k, v] : p.items()) {
    if (k == "rope_type" || k == "type") {
      if (v != "default")
        return KeyError(s, rp_key, "rope type {} is not implemented (only \"default\")", DescribeJson(v));
    } else if (k != "rope_theta" && k != "partial_rotary_factor" && k != "mrope_section" &&
               k != "mrope_interleaved") {
      return KeyError(s, rp_key, "field '{}' is not implemented", k);
    }
  }
  const std::string theta_key = std::string(rp_key) + ".rope_theta";
  if (Find(p, "rope_theta") != nullptr) {
    ASSIGN_OR_RETURN(c->rope_theta, Number(s, p, "rope_theta", theta_key, std::nullopt));
  } else {
    ASSIGN_OR_RETURN(c->rope_theta, Number(s, s.j, "rope_theta", "rope_theta", std::nullopt));
  }
  // transformers reads the factor from rope_parameters, with 0.25 as its default.
  ASSIGN_OR_RETURN(const double top,
                   Number(s, s.j, "partial_rotary_factor", "partial_rotary_factor", 0.25));
  ASSIGN_OR_RETURN(
      c->partial_rotary_factor,
      Number(s, p, "partial_rotary_factor", std::string(rp_key) + ".partial_rotary_factor", top));
  if (c->rope_theta <= 0) return KeyError(s, theta_key, "must be positive");
  const double dims = static_cast<double>(c->head_dim) * c->partial_rotary_factor;
  c->rotary_dim = static_cast<int64_t>(dims);
  if (c->partial_rotary_factor <= 0 || c->partial_rotary_factor > 1 || c->rotary_dim % 2 != 0 ||
      c->rotary_dim < 2)
    return KeyError(s, "partial_rotary_factor",
                    "{} of head_dim {} gives {} rotary dims; need an even count in [2, head_dim]",
                    c->partial_rotary_factor, c->head_dim, dims);
  return Status::Ok();
}

Status ParseDType(const Scope& s, const json& top, Qwen35Config* c) {
  for (const json* obj : {&s.j, &top}) {
    for (const char* key : {"dtype", "torch_dtype"}) {
      const json* v = Find(*obj, key);
      if (v == nullptr) continue;
      if (*v == "bfloat16")
        c->dtype = kernels::DType::kBF16;
      else if (*v == "float16")
        c->dtype = kernels::DType::kF16;
      else if (*v == "float32")
        c->dtype = kernels::DType::kF32;
      else
        return KeyError(s, key, "dtype {} is not supported", DescribeJson(*v));
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// eos_token_id: absent, an id, or a list of ids (decoding's default stop tokens).
Status ParseEos(const Scope& s, const json& obj, Qwen35Config* c) {
  const json* v = Find(obj, "eos_token_id");
  if (v == nullptr) return Status::Ok();
  const json list = v->is_array() ? *v : json::array({*v});
  c->eos_token_ids.clear();
  for (const json& e : list) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      return KeyError(s, "eos_token_id", "expected token ids, got {}", DescribeJson(*v));
    c->eos_token_ids.push_back(e.get<int64_t>());
  }
  return Status::Ok();
}

Status ParseText(const Scope& s, bool moe, Qwen35Config* c) {
  RETURN_IF_ERROR(RejectUnsupported(s, moe));
  ASSIGN_OR_RETURN(c->vocab_size, PositiveInt(s, "vocab_size"));
  ASSIGN_OR_RETURN(c->hidden_size, PositiveInt(s, "hidden_size"));
  if (!moe || Find(s.j, "intermediate_size") != nullptr) {
    ASSIGN_OR_RETURN(c->intermediate_size, PositiveInt(s, "intermediate_size"));
  }
  ASSIGN_OR_RETURN(c->num_hidden_layers, PositiveInt(s, "num_hidden_layers"));
  if (moe) {
    ASSIGN_OR_RETURN(c->moe, ParseMoeKeys(s.j, s.source, s.prefix, c->num_hidden_layers,
                                          MoeFamily::kQwen35Moe));
  }
  ASSIGN_OR_RETURN(c->max_position_embeddings, PositiveInt(s, "max_position_embeddings", 32768));
  ASSIGN_OR_RETURN(c->num_attention_heads, PositiveInt(s, "num_attention_heads"));
  ASSIGN_OR_RETURN(c->num_key_value_heads, PositiveInt(s, "num_key_value_heads"));
  ASSIGN_OR_RETURN(c->head_dim, PositiveInt(s, "head_dim"));
  ASSIGN_OR_RETURN(c->linear_num_key_heads, PositiveInt(s, "linear_num_key_heads"));
  ASSIGN_OR_RETURN(c->linear_num_value_heads, PositiveInt(s, "linear_num_value_heads"));
  ASSIGN_OR_RETURN(c->linear_key_head_dim, PositiveInt(s, "linear_key_head_dim"));
  ASSIGN_OR_RETURN(c->linear_value_head_dim, PositiveInt(s, "linear_value_head_dim"));
  ASSIGN_OR_RETURN(c->linear_conv_kernel_dim, PositiveInt(s, "linear_conv_kernel_dim"));
  ASSIGN_OR_RETURN(c->rms_norm_eps, Number(s, s.j, "rms_norm_eps", "rms_norm_eps", 1e-6));
  if (c->rms_norm_eps <= 0) return KeyError(s, "rms_norm_eps", "must be positive");
  ASSIGN_OR_RETURN(c->initializer_range, ParseInitializerRange(s.j, s.source));
  if (c->num_attention_heads % c->num_key_value_heads != 0)
    return KeyError(s, "num_key_value_heads", "{} does not divide num_attention_heads {}",
                    c->num_key_value_heads, c->num_attention_heads);
  if (c->linear_num_value_heads % c->linear_num_key_heads != 0)
    return KeyError(s, "linear_num_key_heads", "{} does not divide linear_num_value_heads {}",
                    c->linear_num_key_heads, c->linear_num_value_heads);
  RETURN_IF_ERROR(ParseLayerTypes(s, c));
  RETURN_IF_ERROR(ParseEos(s, s.j, c));
  return ParseRope(s, c);
}

}  // namespace

std::string_view HybridLayerTypeName(HybridLayerType t) {
  return t == HybridLayerType::kFullAttention ? "full_attention" : "linear_attention";
}

Result<Qwen35Config> ParseQwen35Config(const json& j, std::string_view source) {
  Qwen35Config c;
  c.source = std::string(source);
  const Scope top{j, source, ""};
  if (!j.is_object()) return InvalidArgumentError("{}: expected a JSON object", source);
  const json* mt = Find(j, "model_type");
  if (mt == nullptr || !mt->is_string()) return KeyError(top, "model_type", "missing");
  c.model_type = mt->get<std::string>();
  if (const json* a = Find(j, "architectures"); a != nullptr && a->is_array()) {
    for (const json& e : *a)
      if (e.is_string()) c.architectures.push_back(e.get<std::string>());
  }
  const bool moe = c.model_type == "qwen3_5_moe" || c.model_type == "qwen3_5_moe_text";
  if (c.model_type == "qwen3_5" || c.model_type == "qwen3_5_moe") {
    const json* text = Find(j, "text_config");
    if (text == nullptr || !text->is_object())
      return KeyError(top, "text_config", "the {} wrapper needs a text_config object",
                      c.model_type);
    RETURN_IF_ERROR(ParseQuantized(top, &c));
    const Scope s{*text, source, "text_config."};
    RETURN_IF_ERROR(ParseQuantized(s, &c));
    const std::string text_type = c.model_type + "_text";
    if (const json* tmt = Find(*text, "model_type"); tmt != nullptr && *tmt != text_type)
      return KeyError(s, "model_type", "{} is not {}", DescribeJson(*tmt), text_type);
    c.weight_prefix = "model.language_model.";
    RETURN_IF_ERROR(ParseText(s, moe, &c));
    if (c.eos_token_ids.empty()) RETURN_IF_ERROR(ParseEos(top, j, &c));
    ASSIGN_OR_RETURN(c.tie_word_embeddings, Bool(top, j, "tie_word_embeddings", false));
    RETURN_IF_ERROR(ParseDType(s, j, &c));
  } else if (c.model_type == "qwen3_5_text" || c.model_type == "qwen3_5_moe_text") {
    c.weight_prefix = "model.";
    RETURN_IF_ERROR(ParseQuantized(top, &c));
    RETURN_IF_ERROR(ParseText(top, moe, &c));
    ASSIGN_OR_RETURN(c.tie_word_embeddings, Bool(top, j, "tie_word_embeddings", false));
    RETURN_IF_ERROR(ParseDType(top, j, &c));
  } else {
    return KeyError(top, "model_type",
                    "'{}' is not a Qwen3.5 hybrid (qwen3_5, qwen3_5_text, qwen3_5_moe or "
                    "qwen3_5_moe_text)",
                    c.model_type);
  }
  return c;
}

const std::vector<std::string>& Qwen35ConfigKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {
      "architectures", "attention_bias", "attn_output_gate", "dtype", "eos_token_id",
      "full_attention_interval", "head_dim", "hidden_act", "hidden_size", "initializer_range",
      "intermediate_size", "layer_types", "linear_conv_kernel_dim", "linear_key_head_dim",
      "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim",
      "max_position_embeddings", "model_type", "moe_intermediate_size", "num_attention_heads",
      "num_experts", "num_hidden_layers", "num_key_value_heads", "num_local_experts",
      "partial_rotary_factor", "quantization_config", "rms_norm_eps", "rope_parameters",
      "rope_scaling", "rope_theta", "text_config", "tie_word_embeddings", "torch_dtype",
      "vocab_size"};
    for (const std::string& m : MoeConfigKeys())
      if (std::find(k.begin(), k.end(), m) == k.end()) k.push_back(m);
    return k;
  }();
  return keys;
}

Result<Qwen35Config> ParseQwen35ConfigText(std::string_view text, std::string_view source) {
  ASSIGN_OR_RETURN(const json j, ParseJson(text, source));
  return ParseQwen35Config(j, source);
}

Result<Qwen35Config> LoadQwen35Config(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path))
    file = (std::filesystem::path(path) / "config.json").string();
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(file));
  return ParseQwen35ConfigText(text, file);
}

}  // namespace tandem::models
