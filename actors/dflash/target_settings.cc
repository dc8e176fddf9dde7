#include "actors/dflash/target_settings.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/data/source_keys.h"
#include "models/dflash/dflash_config.h"
#include "models/qwen3_5/qwen3_5_config.h"
#include "runtime/actor/system.h"
#include "runtime/core/json_parse.h"

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

// A Qwen3.5 / Qwen3.6 hybrid config (the wrappers `qwen3_5` / `qwen3_5_moe` or the text
// models `qwen3_5_text` / `qwen3_5_moe_text`); everything else goes to the dense parser,
// which names what it refuses.
bool IsHybridModelType(const nlohmann::json& j) {
  const auto it = j.find("model_type");
  return it != j.end() && it->is_string() && it->get<std::string>().starts_with("qwen3_5");
}

// `dir`/config.json (or `dir` itself when it is a file) as JSON; errors name the file.
Result<nlohmann::json> ReadConfigJson(const std::string& dir) {
  std::error_code ec;
  const std::string path =
      std::filesystem::is_directory(dir, ec) ? dir + "/config.json" : dir;
  if (!std::filesystem::exists(path, ec))
    return NotFoundError("{}: cannot open (an HF model directory has a config.json)", path);
  // The daemon runs this on submit: bounded parsing keeps a hostile config.json an error for
  // that request (a config.json is a few KB; 64 MB is generous).
  Result<nlohmann::json> j = ReadJsonFile(path, path, size_t{64} << 20);
  if (!j.ok()) return j.status();
  if (!j->is_object()) return InvalidArgumentError("{}: is not a JSON object", path);
  return std::move(j).value();
}

// Fills spec.family / hybrid / config from hybrid config JSON `j` (`source` names it).
Status SetHybrid(const nlohmann::json& j, const std::string& source, TargetModelSpec* spec) {
  ASSIGN_OR_RETURN(models::Qwen35Config hc, models::ParseQwen35Config(j, source));
  spec->family = TargetFamily::kHybrid;
  spec->config = HybridDrafterConfig(hc);
  spec->hybrid = std::move(hc);
  return Status::Ok();
}

Result<TargetModelSpec> ParseLayers(const ConfigValue& s, const std::string& prefix,
                                    TargetModelSpec spec);

// The model of a section already checked against TargetKeys(); `prefix` names it.
Result<TargetModelSpec> ParseModel(const ConfigValue& s, const std::string& prefix,
                                   int64_t job_seed) {
  const KeyTable& k = TargetKeys();
  TargetModelSpec spec;
  spec.model = k.GetString(s, "model");
  spec.seed = static_cast<uint64_t>(k.GetOptInt(s, "seed").value_or(job_seed));
  spec.max_tokens = k.GetInt(s, "max_tokens");
  Result<models::TargetPrecision> precision =
      models::ParseTargetPrecision(k.GetString(s, "precision"));
  if (!precision.ok())
    return InvalidArgumentError("{}: {}", KeyPath(s, prefix, "precision"),
                                precision.status().ToString());
  spec.precision = *precision;
  if (spec.model == "random") {
    const ConfigValue* tc = s.Find("target_config");
    if (tc == nullptr)
      return InvalidArgumentError("{}: model = \"random\" needs a `target_config` table of "
                                  "HF config.json keys (vocab_size, hidden_size, ...)",
                                  KeyPath(s, prefix, "model"));
    ASSIGN_OR_RETURN(nlohmann::json j, ToJson(*tc));
    // A key the parser does not read would be ignored: a typo must not train a default.
    RETURN_IF_ERROR(models::CheckOnlyKnownKeys(
        j, IsHybridModelType(j) ? models::Qwen35ConfigKeys() : models::TransformerConfigKeys(),
        KeyPath(s, prefix, "target_config")));
    if (IsHybridModelType(j)) {
      RETURN_IF_ERROR(SetHybrid(j, KeyPath(s, prefix, "target_config"), &spec));
      return ParseLayers(s, prefix, std::move(spec));
    }
    if (!j.contains("model_type")) j["model_type"] = "qwen3";
    if (!j.contains("architectures")) j["architectures"] = {"Qwen3ForCausalLM"};
    if (!j.contains("rope_theta")) j["rope_theta"] = 1000000.0;
    if (!j.contains("rms_norm_eps")) j["rms_norm_eps"] = 1e-6;
    ASSIGN_OR_RETURN(spec.config, models::ParseTransformerConfig(
                                      j, KeyPath(s, prefix, "target_config")));
  } else {
    if (s.Has("target_config"))
      return InvalidArgumentError("{}: only model = \"random\" takes a target_config (an HF "
                                  "directory has its config.json)",
                                  KeyPath(s, prefix, "target_config"));
    // The family is the checkpoint's: its config.json's model_type.
    // (An unreadable one falls through to the dense loader, whose messages name the file.)
    Result<nlohmann::json> j = ReadConfigJson(spec.model);
    if (j.ok() && IsHybridModelType(*j)) {
      std::error_code ec;
      const std::string source = std::filesystem::is_directory(spec.model, ec)
                                     ? spec.model + "/config.json" : spec.model;
      Status st = SetHybrid(*j, source, &spec);
      if (!st.ok()) return st.WithContext(KeyPath(s, prefix, "model"));
      return ParseLayers(s, prefix, std::move(spec));
    }
    auto config = models::LoadTransformerConfig(spec.model);
    if (!config.ok()) return config.status().WithContext(KeyPath(s, prefix, "model"));
    spec.config = std::move(config).value();
  }
  return ParseLayers(s, prefix, std::move(spec));
}

// The captured layers of `spec`'s target: `layers`, or the DFlash rule.
Result<TargetModelSpec> ParseLayers(const ConfigValue& s, const std::string& prefix,
                                    TargetModelSpec spec) {
  const KeyTable& k = TargetKeys();
  const int64_t n = spec.config.num_hidden_layers;
  if (const ConfigValue* layers = s.Find("layers")) {
    for (const ConfigValue& v : layers->array()) {
      const int64_t id = *v.AsInt();
      if (id >= n)
        return InvalidArgumentError("{}: {} is not a layer of the target (it has {})",
                                    KeyPath(s, prefix, "layers"), id, n);
      // The drafter's target_layer_ids must increase (dflash_config.h): say so here.
      if (!spec.layer_ids.empty() && id <= spec.layer_ids.back())
        return InvalidArgumentError("{}: {} after {}: layer ids must increase, each once",
                                    KeyPath(s, prefix, "layers"), id, spec.layer_ids.back());
      spec.layer_ids.push_back(id);
    }
    if (spec.layer_ids.empty())
      return InvalidArgumentError("{}: is empty", KeyPath(s, prefix, "layers"));
  } else {
    if (n < 5)
      return InvalidArgumentError("{}: give `layers = [...]` explicitly: the default rule needs "
                                  ">= 5 target layers, the target has {}", prefix, n);
    spec.layer_ids = models::DFlashTargetLayerIds(n, k.GetInt(s, "num_context_layers"));
  }
  return spec;
}

}  // namespace

Status CheckFp8Gpu(const ConfigValue& section, std::string_view prefix, std::string_view key,
                   const PlacedGpu& gpu) {
  const ConfigValue* v = section.Find(std::string(key));
  Result<std::string> value = v == nullptr ? Result<std::string>(std::string()) : v->AsString();
  if (!value.ok() || *value != "fp8" || gpu.compute_capability >= 90)
    return Status::Ok();
  return InvalidArgumentError(
      "{}: \"fp8\" needs FP8 tensor cores (compute capability 9.0 or newer, e.g. H100/H200), "
      "but GPU {} ({}) is sm_{}; use \"bf16\" on this GPU",
      KeyPath(section, prefix, key), gpu.index, gpu.name, gpu.compute_capability);
}

const KeyTable& TargetKeys() {
  static const KeyTable* keys = [] {
    auto* t = new KeyTable("dflash.target",
                           "the frozen target: per packed batch, a forward that captures "
                           "hidden states, pushed to `out` (actors/dflash/target_actor.cc)");
    t->String("out", "channel the HiddenBatches go to").Required();
    t->String("model", "an HF directory (config.json + *.safetensors), or \"random\" for random "
              "weights of target_config; its model_type picks the family: qwen3 / llama "
              "(dense), qwen3_moe (mixture of experts), qwen3_5 / qwen3_5_text (Gated "
              "DeltaNet hybrid) or qwen3_5_moe / qwen3_5_moe_text (the hybrid with "
              "mixture-of-experts blocks)").Required();
    t->Table("target_config", "for model = \"random\": HF config.json keys (vocab_size, "
             "hidden_size, num_hidden_layers, ...; model_type = \"qwen3_5_text\" for a "
             "hybrid)").DefaultIs("none");
    t->Int("seed", "seed of the random weights").DefaultIs("[job] seed").Min(0);
    t->Int("max_tokens", "tokens per packed batch").Default(4096).Range(16, 1 << 24);
    t->IntArray("layers", "captured target layer ids").Min(0)
        .DefaultIs("the DFlash rule for num_context_layers");
    t->Int("num_context_layers", "captured layers when `layers` is not given")
        .Default(5).Range(1, 64);
    t->String("precision", "the projections' precision: bf16, or fp8 (block-scaled e4m3, sm_90+)")
        .Default("bf16").OneOf({"bf16", "fp8"});
    t->Include(data::DataSourceKeys());
    t->Int("doc_len", "data = \"synthetic\": tokens per document (at most max_tokens)")
        .Default(64).Range(8, 1 << 24);
    t->Int("batches_per_epoch", "data = \"synthetic\": batches per epoch, split over replicas")
        .Default(64).Min(1);
    t->Number("noise", "data = \"synthetic\": rate of fresh random tokens in a document")
        .Default(0.05).Range(0, 1);
    t->SetCheck([](const ConfigValue& s, const SectionContext& ctx) {
      return ParseTargetSettings(s, ctx).status();
    });
    t->SetDeviceCheck([](const ConfigValue& s, std::string_view prefix, const PlacedGpu& gpu) {
      return CheckFp8Gpu(s, prefix, "precision", gpu);
    });
    // Each replica loads the target's weights on its GPU (a colocated drafter shares them).
    t->SetDeviceBytesEstimate([](const ConfigValue& s, const SectionContext& ctx)
                                  -> Result<KeyTable::DeviceBytes> {
      ASSIGN_OR_RETURN(const TargetModelSpec spec, ParseModel(s, "actors." + ctx.group,
                                                              ctx.job_seed));
      std::string what;
      const uint64_t bytes = TargetDeviceBytes(spec, &what);
      return KeyTable::DeviceBytes{bytes, what};
    });
    return t;
  }();
  return *keys;
}

Result<TargetSettings> ParseTargetSettings(const ConfigValue& section, const SectionContext& ctx) {
  const KeyTable& k = TargetKeys();
  const std::string prefix = "actors." + ctx.group;
  RETURN_IF_ERROR(k.Check(section, prefix, &ActorGroupKeys()));
  TargetSettings s;
  s.out = k.GetString(section, "out");
  // actors/data reads the data-source keys from the section: hand it the declared defaults.
  s.source_section = k.WithDefaults(section);
  ASSIGN_OR_RETURN(s.model, ParseModel(section, prefix, ctx.job_seed));
  s.data = k.GetString(section, "data");
  if (s.data == "synthetic") {
    SyntheticOptions& o = s.synthetic;
    o.vocab = s.model.config.vocab_size;
    o.max_tokens = s.model.max_tokens;
    o.seed = static_cast<uint64_t>(ctx.job_seed);
    o.doc_len = k.GetInt(section, "doc_len");
    o.batches_per_epoch = k.GetInt(section, "batches_per_epoch");
    o.epochs = k.GetInt(section, "epochs");
    o.noise = k.GetNumber(section, "noise");
    if (o.doc_len > o.max_tokens)
      return InvalidArgumentError("{}: {} is more than max_tokens = {}",
                                  KeyPath(section, prefix, "doc_len"), o.doc_len, o.max_tokens);
    const int64_t max_pos = s.model.config.max_position_embeddings;
    if (max_pos > 0 && o.doc_len > max_pos)
      return InvalidArgumentError("{}: {} tokens is more than the target's "
                                  "max_position_embeddings = {}; positions past it were never "
                                  "trained", KeyPath(section, prefix, "doc_len"), o.doc_len,
                                  max_pos);
    if (o.epochs < 1)
      return InvalidArgumentError("{}: data = \"synthetic\" needs epochs >= 1",
                                  KeyPath(section, prefix, "epochs"));
    return s;
  }
  std::error_code ec;
  if (!std::filesystem::exists(s.data, ec)) {
    return InvalidArgumentError("{}: '{}' does not exist (give a .jsonl file, a binary set "
                                "directory made by `tandem data`, or \"synthetic\")",
                                KeyPath(section, prefix, "data"), s.data);
  }
  return s;
}

Result<TargetModelSpec> ParseTargetModelSpec(const ConfigValue& section, int64_t job_seed) {
  RETURN_IF_ERROR(TargetKeys().Check(section, "dflash.target", &ActorGroupKeys()));
  return ParseModel(section, "dflash.target", job_seed);
}

}  // namespace tandem::dflash
