#include "actors/dflash/target_settings.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/dflash/dflash_config.h"

namespace tandem::dflash {
namespace {

Result<nlohmann::json> ToJson(const ConfigValue& v) {
  switch (v.kind()) {
    case ConfigValue::Kind::kBool: return nlohmann::json(*v.AsBool());
    case ConfigValue::Kind::kInt: return nlohmann::json(*v.AsInt());
    case ConfigValue::Kind::kDouble: return nlohmann::json(*v.AsDouble());
    case ConfigValue::Kind::kString: return nlohmann::json(*v.AsString());
    case ConfigValue::Kind::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const ConfigValue& e : v.array()) {
        ASSIGN_OR_RETURN(nlohmann::json j, ToJson(e));
        a.push_back(std::move(j));
      }
      return a;
    }
    case ConfigValue::Kind::kTable: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, e] : v.table()) {
        ASSIGN_OR_RETURN(nlohmann::json j, ToJson(e));
        o[k] = std::move(j);
      }
      return o;
    }
    case ConfigValue::Kind::kNull: break;
  }
  return nlohmann::json();
}

}  // namespace

Result<TargetModelSpec> ParseTargetModelSpec(const ConfigValue& s, int64_t job_seed) {
  TargetModelSpec spec;
  const std::string& where = s.location();
  ASSIGN_OR_RETURN(spec.model, s.GetString("model", ""));
  ASSIGN_OR_RETURN(int64_t seed, s.GetInt("seed", job_seed));
  spec.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(spec.max_tokens, s.GetInt("max_tokens", 4096));
  if (spec.max_tokens < 16)
    return InvalidArgumentError("{}: max_tokens = {} (must be >= 16)", where, spec.max_tokens);
  if (spec.model.empty()) {
    return InvalidArgumentError(
        "{}: dflash.target needs `model` (an HF directory, or \"random\" with target_config)",
        where);
  }
  if (spec.model == "random") {
    const ConfigValue* tc = s.Find("target_config");
    if (tc == nullptr || !tc->is_table())
      return InvalidArgumentError("{}: model = \"random\" needs a `target_config` table of "
                                  "HF config.json keys (vocab_size, hidden_size, ...)", where);
    ASSIGN_OR_RETURN(nlohmann::json j, ToJson(*tc));
    if (!j.contains("model_type")) j["model_type"] = "qwen3";
    if (!j.contains("architectures")) j["architectures"] = {"Qwen3ForCausalLM"};
    if (!j.contains("rope_theta")) j["rope_theta"] = 1000000.0;
    if (!j.contains("rms_norm_eps")) j["rms_norm_eps"] = 1e-6;
    ASSIGN_OR_RETURN(spec.config,
                     models::ParseTransformerConfig(j, fmt::format("{} target_config", where)));
  } else {
    ASSIGN_OR_RETURN(spec.config, models::LoadTransformerConfig(spec.model));
  }
  const int64_t n = spec.config.num_hidden_layers;
  if (const ConfigValue* layers = s.Find("layers"); layers != nullptr) {
    if (!layers->is_array())
      return InvalidArgumentError("{}: `layers` must be an array of layer ids", where);
    for (const ConfigValue& v : layers->array()) {
      ASSIGN_OR_RETURN(int64_t id, v.AsInt());
      if (id < 0 || id >= n)
        return InvalidArgumentError("{}: layers: {} is not in [0, {})", where, id, n);
      spec.layer_ids.push_back(id);
    }
  } else {
    ASSIGN_OR_RETURN(int64_t k, s.GetInt("num_context_layers", 5));
    if (n < 5 || k < 1)
      return InvalidArgumentError("{}: give `layers = [...]` explicitly: the default rule "
                                  "needs >= 5 target layers and num_context_layers >= 1", where);
    spec.layer_ids = models::DFlashTargetLayerIds(n, k);
  }
  if (spec.layer_ids.empty()) return InvalidArgumentError("{}: `layers` is empty", where);
  return spec;
}

Result<TargetSettings> ParseTargetSettings(const ConfigValue& s, const std::string& name,
                                           int64_t job_seed) {
  TargetSettings t;
  ASSIGN_OR_RETURN(t.out, s.GetString("out", ""));
  if (t.out.empty()) return InvalidArgumentError("{}: dflash.target needs `out`", name);
  ASSIGN_OR_RETURN(t.model, ParseTargetModelSpec(s, job_seed));
  SyntheticOptions& o = t.synthetic;
  o.vocab = t.model.config.vocab_size;
  o.max_tokens = t.model.max_tokens;
  o.seed = static_cast<uint64_t>(job_seed);
  ASSIGN_OR_RETURN(t.data, s.GetString("data", "synthetic"));
  if (t.data != "synthetic") return t;
  ASSIGN_OR_RETURN(o.doc_len, s.GetInt("doc_len", 64));
  ASSIGN_OR_RETURN(o.batches_per_epoch, s.GetInt("batches_per_epoch", 64));
  ASSIGN_OR_RETURN(o.epochs, s.GetInt("epochs", 1));
  ASSIGN_OR_RETURN(o.noise, s.GetDouble("noise", 0.05));
  if (o.doc_len < 8 || o.doc_len > o.max_tokens || o.batches_per_epoch < 1 || o.epochs < 1)
    return InvalidArgumentError("{}: need 8 <= doc_len <= max_tokens, batches_per_epoch >= 1, "
                                "epochs >= 1", s.location());
  return t;
}

}  // namespace tandem::dflash
