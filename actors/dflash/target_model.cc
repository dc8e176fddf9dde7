#include "actors/dflash/target_model.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/dflash/dflash_config.h"
#include "models/qwen3/qwen3_weights.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

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

std::mutex g_mu;
std::map<std::string, std::weak_ptr<SharedTarget>> g_targets;  // GUARDED_BY(g_mu)

}  // namespace

std::string TargetModelSpec::Key() const {
  return fmt::format("{}|{}|{}|{}", model, TransformerConfigToJson(config).dump(), seed,
                     models::TargetPrecisionName(precision));
}

Result<TargetModelSpec> ParseTargetModelSpec(const ConfigValue& s, int64_t job_seed) {
  TargetModelSpec spec;
  const std::string& where = s.location();
  ASSIGN_OR_RETURN(spec.model, s.GetString("model", ""));
  ASSIGN_OR_RETURN(int64_t seed, s.GetInt("seed", job_seed));
  spec.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(spec.max_tokens, s.GetInt("max_tokens", 4096));
  ASSIGN_OR_RETURN(std::string precision, s.GetString("precision", "bf16"));
  Result<models::TargetPrecision> parsed = models::ParseTargetPrecision(precision);
  if (!parsed.ok()) return InvalidArgumentError("{}: {}", where, parsed.status().ToString());
  spec.precision = *parsed;
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

kernels::Device ActorDevice(int gpu) {
#ifdef TANDEM_HAVE_CUDA
  int count = 0;
  if (gpu >= 0 && cudaGetDeviceCount(&count) == cudaSuccess && gpu < count)
    return kernels::Device::Cuda(gpu);
#endif
  (void)gpu;
  return kernels::Device::Cpu();
}

SharedTarget::~SharedTarget() {
  model_.reset();
#ifdef TANDEM_HAVE_CUDA
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
#endif
}

Result<std::shared_ptr<SharedTarget>> AcquireTarget(const TargetModelSpec& spec,
                                                    kernels::Device device, uint64_t run_id) {
  const std::string key = fmt::format("run{}|{}|{}:{}", run_id, spec.Key(),
                                      device.is_cuda() ? "cuda" : "cpu", device.index);
  // Held while loading, so a colocated drafter waits for the target's copy instead of
  // loading a second one.
  std::lock_guard lock(g_mu);
  if (auto existing = g_targets[key].lock()) {
    if (existing->model().max_tokens() < spec.max_tokens)
      return InvalidArgumentError("target {} is already loaded with max_tokens {} < {}",
                                  spec.model, existing->model().max_tokens(), spec.max_tokens);
    return existing;
  }
  auto shared = std::make_shared<SharedTarget>();
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
      return InternalError("cudaStreamCreate failed on device {}", device.index);
    shared->stream_ = s;
  }
#endif
  models::Qwen3TargetOptions options{spec.max_tokens, shared->stream_, spec.precision};
  if (spec.model == "random") {
    ASSIGN_OR_RETURN(models::Qwen3Weights w,
                     models::Qwen3Weights::Random(spec.config, device, spec.seed,
                                                  shared->stream_));
    ASSIGN_OR_RETURN(shared->model_, models::Qwen3Target::Create(std::move(w), options));
  } else {
    ASSIGN_OR_RETURN(shared->model_, models::Qwen3Target::Load(spec.model, device, options));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, shared->stream_));
  g_targets[key] = shared;
  return shared;
}

}  // namespace tandem::dflash
