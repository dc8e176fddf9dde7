#include "models/io/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/io/file_util.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;
using config_detail::GetInt;

template <typename... Args>
Status KeyError(std::string_view source, std::string_view key, fmt::format_string<Args...> f,
                Args&&... args) {
  return InvalidArgumentError("{}: key '{}': {}", source, key,
                              fmt::format(f, std::forward<Args>(args)...));
}

const json* Find(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Result<double> GetNumber(const json& j, std::string_view source, const char* key,
                         std::optional<double> fallback) {
  const json* v = Find(j, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return KeyError(source, key, "missing");
  }
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    return KeyError(source, key, "expected a number, got {}", DescribeJson(*v));
  }
  return v->get<double>();
}

Result<bool> GetBool(const json& j, std::string_view source, const char* key, bool fallback) {
  const json* v = Find(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return KeyError(source, key, "expected true or false, got {}", DescribeJson(*v));
  return v->get<bool>();
}

// Keys whose presence means a model tandem cannot run correctly.
Status RejectUnsupportedKeys(const json& j, std::string_view source) {
  struct Rule {
    const char* key;
    const char* why;
  };
  static const Rule kRules[] = {
      {"num_experts", "mixture-of-experts models are supported as model_type qwen3_moe only"},
      {"num_local_experts",
       "mixture-of-experts models are supported as model_type qwen3_moe only"},
      {"linear_num_value_heads", "Gated DeltaNet layers are not supported yet"},
      {"full_attention_interval", "Gated DeltaNet layers are not supported yet"},
  };
  const bool moe = j.value("model_type", json()) == "qwen3_moe";
  for (const Rule& r : kRules) {
    if (moe && std::string_view(r.key).ends_with("experts")) continue;
    if (Find(j, r.key) != nullptr) return KeyError(source, r.key, "{}", r.why);
  }
  return Status::Ok();
}

// quantization_config: only the FP8 block layout of the official Qwen / DeepSeek-V3 FP8
// checkpoints (quant_method "fp8", e4m3, weight_block_size [128, 128], dynamic activations).
Status ParseQuantization(const json& j, std::string_view source, TransformerConfig* c) {
  return ParseFp8QuantizationConfig(j, source, &c->fp8_block_weights);
}

}  // namespace

Status ParseFp8QuantizationConfig(const json& j, std::string_view source,
                                  bool* fp8_block_weights) {
  *fp8_block_weights = false;
  const json* q = Find(j, "quantization_config");
  if (q == nullptr) return Status::Ok();
  constexpr const char* kKey = "quantization_config";
  if (!q->is_object()) return KeyError(source, kKey, "expected an object, got {}", DescribeJson(*q));
  const auto str = [q](const char* k) -> std::string {
    auto it = q->find(k);
    return it != q->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (str("quant_method") != "fp8")
    return KeyError(source, kKey, "quant_method {} is not supported (only \"fp8\" with 128x128 "
                    "weight blocks)", q->contains("quant_method") ? DescribeJson((*q)["quant_method"]) : "missing");
  const json bs = q->value("weight_block_size", json());
  if (!(bs.is_array() && bs.size() == 2 && bs[0] == 128 && bs[1] == 128))
    return KeyError(source, kKey, "weight_block_size {} is not supported (only [128, 128]; "
                    "per-tensor FP8 checkpoints are not implemented)", bs.is_null() ? "missing" : DescribeJson(bs));
  if (q->contains("fmt") && str("fmt") != "e4m3")
    return KeyError(source, kKey, "fmt {} is not supported (only \"e4m3\")", DescribeJson((*q)["fmt"]));
  if (q->contains("activation_scheme") && str("activation_scheme") != "dynamic")
    return KeyError(source, kKey, "activation_scheme {} is not supported (only \"dynamic\")",
                    DescribeJson((*q)["activation_scheme"]));
  *fp8_block_weights = true;
  return Status::Ok();
}

namespace {

Status ParseModelType(const json& j, std::string_view source, TransformerConfig* c) {
  const json* mt = Find(j, "model_type");
  if (mt == nullptr || !mt->is_string()) return KeyError(source, "model_type", "missing");
  c->model_type = mt->get<std::string>();
  if (c->model_type == "qwen3" || c->model_type == "qwen3_moe") {
    c->family = ModelFamily::kQwen3;
    c->qk_norm = true;
  } else if (c->model_type == "llama") {
    c->family = ModelFamily::kLlama;
    c->qk_norm = false;
  } else if (c->model_type.starts_with("qwen3_5")) {
    return KeyError(source, "model_type",
                    "'{}': a Gated DeltaNet hybrid, which the dense loader does not read "
                    "(models/qwen3_5 does; a dflash.target picks it by model_type)",
                    c->model_type);
  } else if (c->model_type.starts_with("qwen3_next") ||
             c->model_type.find("hybrid") != std::string::npos) {
    return KeyError(source, "model_type", "'{}': Gated DeltaNet layers are not supported yet",
                    c->model_type);
  } else {
    return KeyError(source, "model_type", "'{}' is not supported (tandem runs qwen3, qwen3_moe and llama)",
                    c->model_type);
  }
  if (const json* a = Find(j, "architectures")) {
    if (!a->is_array()) return KeyError(source, "architectures", "expected a list of names");
    for (const json& s : *a) {
      if (!s.is_string()) return KeyError(source, "architectures", "expected a list of names");
      c->architectures.push_back(s.get<std::string>());
    }
  }
  return Status::Ok();
}

Status ParseRope(const json& j, std::string_view source, TransformerConfig* c) {
  auto check_type = [&](const json& obj, const char* key) -> Status {
    for (const char* type_key : {"rope_type", "type"}) {
      const json* t = Find(obj, type_key);
      if (t != nullptr && (!t->is_string() || t->get<std::string>() != "default")) {
        return KeyError(source, key, "rope type {} is not implemented (only \"default\")",
                        DescribeJson(*t));
      }
    }
    return Status::Ok();
  };
  std::optional<double> theta;
  if (const json* rp = Find(j, "rope_parameters")) {
    if (!rp->is_object()) return KeyError(source, "rope_parameters", "expected an object");
    RETURN_IF_ERROR(check_type(*rp, "rope_parameters"));
    for (const auto& [k, v] : rp->items()) {
      if (k != "rope_type" && k != "type" && k != "rope_theta" && k != "partial_rotary_factor") {
        return KeyError(source, "rope_parameters", "field '{}' is not implemented", k);
      }
    }
    if (Find(*rp, "rope_theta") != nullptr) {
      ASSIGN_OR_RETURN(theta, GetNumber(*rp, source, "rope_theta", std::nullopt));
    }
    ASSIGN_OR_RETURN(double f, GetNumber(*rp, source, "partial_rotary_factor", 1.0));
    if (f != 1.0) return KeyError(source, "rope_parameters", "partial_rotary_factor must be 1");
  }
  if (const json* rs = Find(j, "rope_scaling")) {
    if (!rs->is_object()) return KeyError(source, "rope_scaling", "expected an object or null");
    RETURN_IF_ERROR(check_type(*rs, "rope_scaling"));
  }
  ASSIGN_OR_RETURN(double prf, GetNumber(j, source, "partial_rotary_factor", 1.0));
  if (prf != 1.0) return KeyError(source, "partial_rotary_factor", "must be 1, got {}", prf);
  if (!theta) {
    ASSIGN_OR_RETURN(theta, GetNumber(j, source, "rope_theta", std::nullopt));
  }
  if (*theta <= 0) return KeyError(source, "rope_theta", "must be positive, got {}", *theta);
  c->rope_type = RopeType::kDefault;
  c->rope_theta = *theta;
  c->rotary_dim = c->head_dim;
  return Status::Ok();
}

Status ParseLayerTypes(const json& j, std::string_view source, TransformerConfig* c) {
  ASSIGN_OR_RETURN(bool use_sliding, GetBool(j, source, "use_sliding_window", false));
  c->layer_types.assign(c->num_hidden_layers, LayerType::kFullAttention);
  if (const json* lt = Find(j, "layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c->num_hidden_layers) {
      return KeyError(source, "layer_types", "expected a list of {} layer types",
                      c->num_hidden_layers);
    }
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& t = (*lt)[i];
      const std::string s = t.is_string() ? t.get<std::string>() : DescribeJson(t);
      if (s == "full_attention") continue;
      if (s == "sliding_attention" && use_sliding) {
        c->layer_types[i] = LayerType::kSlidingAttention;
      } else if (s == "sliding_attention") {
        return KeyError(source, "layer_types", "layer {} is sliding_attention but "
                        "use_sliding_window is not true", i);
      } else if (s == "linear_attention") {
        return KeyError(source, "layer_types", "layer {} is linear_attention: Gated DeltaNet "
                        "layers are not supported yet", i);
      } else {
        return KeyError(source, "layer_types", "layer {} has unsupported type {}", i, s);
      }
    }
  } else if (use_sliding && c->family == ModelFamily::kQwen3) {
    // transformers' Qwen3 rule: layers from max_window_layers on use the window.
    ASSIGN_OR_RETURN(int64_t mwl, GetInt(j, source, "max_window_layers", 28));
    for (int64_t i = mwl; i < c->num_hidden_layers; ++i) {
      c->layer_types[i] = LayerType::kSlidingAttention;
    }
  }
  bool any_sliding = false;
  for (LayerType t : c->layer_types) any_sliding |= t == LayerType::kSlidingAttention;
  if (any_sliding) {
    ASSIGN_OR_RETURN(int64_t w, GetInt(j, source, "sliding_window"));
    if (w <= 0) return KeyError(source, "sliding_window", "must be positive, got {}", w);
    c->sliding_window = w;
  }
  return Status::Ok();
}

Status ParseDType(const json& j, std::string_view source, TransformerConfig* c) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    const json* v = Find(j, key);
    if (v == nullptr) continue;
    const std::string s = v->is_string() ? v->get<std::string>() : DescribeJson(*v);
    if (s == "bfloat16") c->dtype = kernels::DType::kBF16;
    else if (s == "float16") c->dtype = kernels::DType::kF16;
    else if (s == "float32") c->dtype = kernels::DType::kF32;
    else return KeyError(source, key, "dtype {} is not supported", s);
    return Status::Ok();
  }
  c->dtype = kernels::DType::kBF16;
  return Status::Ok();
}

}  // namespace

namespace config_detail {

Result<int64_t> GetInt(const json& j, std::string_view source, const char* key,
                       std::optional<int64_t> fallback) {
  const json* v = Find(j, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return KeyError(source, key, "missing");
  }
  if (!v->is_number_integer()) return KeyError(source, key, "expected an integer, got {}", DescribeJson(*v));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return KeyError(source, key, "{} is too large", DescribeJson(*v));
  }
  return v->get<int64_t>();
}

Result<std::vector<int64_t>> GetIntList(const json& j, std::string_view source, const char* key) {
  const json* v = Find(j, key);
  if (v == nullptr || !v->is_array()) return KeyError(source, key, "expected a list of integers");
  std::vector<int64_t> out;
  for (const json& e : *v) {
    if (!e.is_number_integer()) return KeyError(source, key, "expected a list of integers");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

}  // namespace config_detail

std::string_view LayerTypeName(LayerType t) {
  return t == LayerType::kSlidingAttention ? "sliding_attention" : "full_attention";
}

Result<TransformerConfig> ParseTransformerConfig(const json& j, std::string_view source) {
  if (!j.is_object()) return InvalidArgumentError("{}: expected a JSON object", source);
  TransformerConfig c;
  RETURN_IF_ERROR(ParseModelType(j, source, &c));
  RETURN_IF_ERROR(RejectUnsupportedKeys(j, source));
  ASSIGN_OR_RETURN(c.vocab_size, GetInt(j, source, "vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, GetInt(j, source, "hidden_size"));
  ASSIGN_OR_RETURN(c.num_hidden_layers, GetInt(j, source, "num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_attention_heads, GetInt(j, source, "num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_key_value_heads,
                   GetInt(j, source, "num_key_value_heads", c.num_attention_heads));
  ASSIGN_OR_RETURN(c.intermediate_size, GetInt(j, source, "intermediate_size"));
  ASSIGN_OR_RETURN(c.max_position_embeddings, GetInt(j, source, "max_position_embeddings"));
  // Upper bounds far above any real model, low enough that the weight sizes computed from
  // them (vocab * hidden, heads * head_dim * hidden, ...) cannot overflow int64, and that
  // token ids and positions fit the int32 they are carried in.
  struct Bound {
    const char* key;
    int64_t value, max;
  };
  for (const Bound& b : {Bound{"vocab_size", c.vocab_size, int64_t{1} << 31},
                         Bound{"hidden_size", c.hidden_size, int64_t{1} << 20},
                         Bound{"num_hidden_layers", c.num_hidden_layers, int64_t{1} << 12},
                         Bound{"num_attention_heads", c.num_attention_heads, int64_t{1} << 12},
                         Bound{"num_key_value_heads", c.num_key_value_heads, int64_t{1} << 12},
                         Bound{"intermediate_size", c.intermediate_size, int64_t{1} << 22},
                         Bound{"max_position_embeddings", c.max_position_embeddings,
                               (int64_t{1} << 31) - 1}}) {
    if (b.value <= 0) return KeyError(source, b.key, "must be positive, got {}", b.value);
    if (b.value > b.max) return KeyError(source, b.key, "{} is above the limit {}", b.value, b.max);
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return KeyError(source, "num_key_value_heads", "{} does not divide num_attention_heads {}",
                    c.num_key_value_heads, c.num_attention_heads);
  }
  if (Find(j, "head_dim") == nullptr && c.hidden_size % c.num_attention_heads != 0) {
    return KeyError(source, "head_dim", "missing, and hidden_size {} is not a multiple of "
                    "num_attention_heads {}", c.hidden_size, c.num_attention_heads);
  }
  ASSIGN_OR_RETURN(c.head_dim, GetInt(j, source, "head_dim", c.hidden_size / c.num_attention_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > (int64_t{1} << 14)) {
    return KeyError(source, "head_dim", "must be positive, even and at most 16384, got {}",
                    c.head_dim);
  }
  ASSIGN_OR_RETURN(c.rms_norm_eps, GetNumber(j, source, "rms_norm_eps", 1e-6));
  if (c.rms_norm_eps <= 0) return KeyError(source, "rms_norm_eps", "must be positive");
  ASSIGN_OR_RETURN(c.initializer_range, ParseInitializerRange(j, source));
  ASSIGN_OR_RETURN(c.tie_word_embeddings, GetBool(j, source, "tie_word_embeddings", false));
  if (const json* act = Find(j, "hidden_act"); act != nullptr && *act != "silu") {
    return KeyError(source, "hidden_act", "{} is not supported (only \"silu\")", DescribeJson(*act));
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    ASSIGN_OR_RETURN(bool bias, GetBool(j, source, key, false));
    if (bias) return KeyError(source, key, "biases are not supported (must be false)");
  }
  ASSIGN_OR_RETURN(int64_t tp, GetInt(j, source, "pretraining_tp", 1));
  if (tp != 1) return KeyError(source, "pretraining_tp", "must be 1, got {}", tp);
  RETURN_IF_ERROR(ParseRope(j, source, &c));
  RETURN_IF_ERROR(ParseLayerTypes(j, source, &c));
  RETURN_IF_ERROR(ParseDType(j, source, &c));
  RETURN_IF_ERROR(ParseQuantization(j, source, &c));
  if (c.model_type == "qwen3_moe") RETURN_IF_ERROR(config_detail::ParseMoeConfig(j, source, &c));
  if (Find(j, "bos_token_id") != nullptr) {
    ASSIGN_OR_RETURN(c.bos_token_id, GetInt(j, source, "bos_token_id"));
  }
  if (const json* eos = Find(j, "eos_token_id")) {
    if (eos->is_array()) {
      ASSIGN_OR_RETURN(c.eos_token_ids, config_detail::GetIntList(j, source, "eos_token_id"));
    } else {
      ASSIGN_OR_RETURN(int64_t e, GetInt(j, source, "eos_token_id"));
      c.eos_token_ids = {e};
    }
  }
  return c;
}

Result<std::optional<double>> ParseInitializerRange(const json& j, std::string_view source) {
  if (Find(j, "initializer_range") == nullptr) return std::optional<double>();
  ASSIGN_OR_RETURN(const double r, GetNumber(j, source, "initializer_range", std::nullopt));
  if (r <= 0) return KeyError(source, "initializer_range", "must be positive, got {}", r);
  return std::optional<double>(r);
}

Result<TransformerConfig> ParseTransformerConfigText(std::string_view text,
                                                     std::string_view source) {
  ASSIGN_OR_RETURN(const json j, ParseJson(text, source));
  return ParseTransformerConfig(j, source);
}

Result<TransformerConfig> LoadTransformerConfig(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) file = (std::filesystem::path(path) / "config.json").string();
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(file));
  return ParseTransformerConfigText(text, file);
}

const std::vector<std::string>& TransformerConfigKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {
      "architectures", "attention_bias", "attention_dropout", "bos_token_id", "dtype",
      "eos_token_id", "head_dim", "hidden_act", "hidden_size", "initializer_range",
      "intermediate_size", "layer_types", "max_position_embeddings", "max_window_layers",
      "mlp_bias", "model_type", "num_attention_heads", "num_experts", "num_hidden_layers",
      "num_key_value_heads", "num_local_experts", "pretraining_tp", "quantization_config",
      "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta", "sliding_window",
      "tie_word_embeddings", "torch_dtype", "use_sliding_window", "vocab_size"};
    for (const std::string& m : MoeConfigKeys())
      if (std::find(k.begin(), k.end(), m) == k.end()) k.push_back(m);
    return k;
  }();
  return keys;
}

Status CheckOnlyKnownKeys(const json& j, const std::vector<std::string>& known,
                          std::string_view source) {
  if (!j.is_object()) return Status::Ok();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    // The closest known key by edit distance, when it is close.
    std::string best;
    size_t best_d = 3;
    for (const std::string& cand : known) {
      std::vector<size_t> row(cand.size() + 1);
      for (size_t c = 0; c <= cand.size(); ++c) row[c] = c;
      for (size_t r = 1; r <= k.size() && k.size() < 64; ++r) {
        size_t diag = row[0];
        row[0] = r;
        for (size_t c = 1; c <= cand.size(); ++c) {
          const size_t up = row[c];
          row[c] = std::min({row[c] + 1, row[c - 1] + 1, diag + (k[r - 1] != cand[c - 1])});
          diag = up;
        }
      }
      if (k.size() < 64 && row[cand.size()] < best_d) {
        best_d = row[cand.size()];
        best = cand;
      }
    }
    return InvalidArgumentError("{}: unknown key {}{}; it would be ignored (the known keys are "
                                "the HF config.json keys tandem reads)", source,
                                DescribeJson(json(k), 60),
                                best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best));
  }
  return Status::Ok();
}

json TransformerConfigToJson(const TransformerConfig& c) {
  json j;
  j["architectures"] = c.architectures;
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  if (c.initializer_range) j["initializer_range"] = *c.initializer_range;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  // Both spellings: transformers 5 reads rope_parameters, 4.x (and servers pinned to it)
  // read rope_theta / rope_scaling.
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  if (c.family == ModelFamily::kQwen3) {
    std::vector<std::string> types;
    for (LayerType t : c.layer_types) types.emplace_back(LayerTypeName(t));
    j["layer_types"] = types;
    j["use_sliding_window"] = c.sliding_window.has_value();
    j["sliding_window"] = c.sliding_window ? json(*c.sliding_window) : json(nullptr);
    j["max_window_layers"] = c.num_hidden_layers;
  }
  j["dtype"] = c.dtype == kernels::DType::kF32   ? "float32"
               : c.dtype == kernels::DType::kF16 ? "float16"
                                                 : "bfloat16";
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) j["eos_token_id"] = c.eos_token_ids;
  config_detail::MoeConfigToJson(c, &j);
  return j;
}

}  // namespace tandem::models
