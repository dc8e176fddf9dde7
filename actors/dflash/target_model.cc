#include "actors/dflash/target_model.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/qwen3/qwen3_weights.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#endif

namespace tandem::dflash {
namespace {

// The targets of one job, by weights and device (in its JobRegistry).
struct TargetTable {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<SharedTarget>> by_key;  // GUARDED_BY(mu)
};

}  // namespace

std::string TargetModelSpec::Key() const {
  return fmt::format("{}|{}|{}|{}", model, TransformerConfigToJson(config).dump(), seed,
                     models::TargetPrecisionName(precision));
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
    const auto s = static_cast<cudaStream_t>(stream_);
    CUDA_LOG_IF_ERROR(cudaStreamSynchronize(s));
    CUDA_LOG_IF_ERROR(cudaStreamDestroy(s));
  }
#endif
}

Result<std::shared_ptr<SharedTarget>> LoadTarget(const TargetModelSpec& spec,
                                                 kernels::Device device) {
  auto shared = std::make_shared<SharedTarget>();
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) {
    kernels::DeviceGuard guard(device.index);
    cudaStream_t s = nullptr;
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    shared->stream_ = s;
  }
#endif
  models::Qwen3TargetOptions options{spec.max_tokens, shared->stream_, spec.precision};
  if (spec.model == "random") {
    ASSIGN_OR_RETURN(shared->model_,
                     models::Qwen3Target::Random(spec.config, device, spec.seed, options));
  } else {
    ASSIGN_OR_RETURN(shared->model_, models::Qwen3Target::Load(spec.model, device, options));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, shared->stream_));
  return shared;
}

Result<models::Qwen3Head> LoadTargetHead(const TargetModelSpec& spec, kernels::Device device,
                                         kernels::Stream stream) {
  if (spec.model == "random")
    return models::Qwen3Head::Random(spec.config, device, spec.seed, stream);
  return models::Qwen3Head::Load(spec.model, spec.config, device, stream);
}

Result<std::shared_ptr<SharedTarget>> AcquireTarget(JobRegistry& registry,
                                                    const TargetModelSpec& spec,
                                                    kernels::Device device) {
  const std::string key =
      fmt::format("{}|{}:{}", spec.Key(), device.is_cuda() ? "cuda" : "cpu", device.index);
  TargetTable& table = registry.Get<TargetTable>();
  // Held while loading, so a second actor waits for the first one's copy instead of loading
  // another.
  std::lock_guard lock(table.mu);
  if (auto existing = table.by_key[key].lock()) {
    if (existing->model().max_tokens() < spec.max_tokens)
      return InvalidArgumentError("target {} is already loaded with max_tokens {} < {}",
                                  spec.model, existing->model().max_tokens(), spec.max_tokens);
    return existing;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<SharedTarget> shared, LoadTarget(spec, device));
  table.by_key[key] = shared;
  return shared;
}

}  // namespace tandem::dflash
