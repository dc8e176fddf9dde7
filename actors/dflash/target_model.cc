#include "actors/dflash/target_model.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/qwen3/qwen3_weights.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tandem::dflash {
namespace {

std::mutex g_mu;
std::map<std::string, std::weak_ptr<SharedTarget>> g_targets;  // GUARDED_BY(g_mu)

}  // namespace

std::string TargetModelSpec::Key() const {
  return fmt::format("{}|{}|{}", model, TransformerConfigToJson(config).dump(), seed);
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
                                                    kernels::Device device) {
  const std::string key =
      fmt::format("{}|{}:{}", spec.Key(), device.is_cuda() ? "cuda" : "cpu", device.index);
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
  models::Qwen3TargetOptions options{spec.max_tokens, shared->stream_};
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
