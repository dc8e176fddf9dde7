#include "actors/dflash/target_model.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/core/device_pools.h"
#include "models/io/weight_spec.h"
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
  std::string hybrid_shape;
  if (hybrid) {
    const models::Qwen35Config& c = *hybrid;
    // Not c.source: it names where the config was read (a key path differs between the
    // target actor's and the drafter's parse of one job), and a second key would load a
    // second copy of the weights.
    hybrid_shape = fmt::format("|hybrid {} {} {} {} {} {} {} {}", c.rotary_dim,
                               c.linear_num_key_heads, c.linear_num_value_heads,
                               c.linear_key_head_dim, c.linear_value_head_dim,
                               c.linear_conv_kernel_dim, c.rms_norm_eps,
                               c.layer_types.size());
    for (models::HybridLayerType t : c.layer_types) hybrid_shape += models::HybridLayerTypeName(t);
    if (c.moe)
      hybrid_shape += fmt::format("|moe {} {} {} {}", c.moe->num_experts,
                                  c.moe->num_experts_per_tok, c.moe->moe_intermediate_size,
                                  c.moe->shared_expert_intermediate_size);
  }
  return fmt::format("{}|{}|{}|{}{}", model, TransformerConfigToJson(config).dump(), seed,
                     models::TargetPrecisionName(precision), hybrid_shape);
}

uint64_t TargetWeightBytes(const TargetModelSpec& spec) {
  const std::vector<models::WeightSpec> specs = spec.hybrid
                                                    ? models::Qwen35WeightSpecs(*spec.hybrid)
                                                    : models::CausalLmWeightSpecs(spec.config);
  const bool fp8 = spec.precision == models::TargetPrecision::kFp8;
  uint64_t bytes = 0;
  for (const models::WeightSpec& w : specs) {
    uint64_t n = 1;
    for (int64_t d : w.shape) n *= static_cast<uint64_t>(d);
    // What has an FP8 form: a layer's matrices, a MoE layer's experts in either layout (the
    // fused ones are 3-d), not its router or its shared expert's gate (they stay bf16).
    const bool moe_bf16 = w.name.ends_with(".mlp.gate.weight") ||
                          w.name.ends_with(".mlp.shared_expert_gate.weight");
    const bool projection =
        w.name.find(".layers.") != std::string::npos && !moe_bf16 &&
        (w.shape.size() == 2 || w.name.find(".mlp.experts.") != std::string::npos);
    if (fp8 && projection && spec.hybrid) continue;  // counted exactly below
    bytes += n * (fp8 && projection ? 1 : 2);
  }
  // The hybrid's e4m3 codes and scales, as Qwen35Fp8Projections allocates them.
  if (fp8 && spec.hybrid)
    bytes += static_cast<uint64_t>(models::Qwen35Fp8Projections::Bytes(*spec.hybrid));
  return bytes;
}

uint64_t TargetDeviceBytes(const TargetModelSpec& spec, std::string* what) {
  // With fp8, every family quantizes layer by layer as it loads: the load holds the e4m3
  // model (and the bf16 embeddings, norms and routers) beside one layer's bf16 projections
  // in a staging buffer, freed before the workspace is allocated. For a Qwen3 or Qwen3-MoE
  // target that layer is counted (Qwen3Weights::StagingBytes: a MoE layer stages all its
  // routed experts, 1.25 GB for Qwen3-30B-A3B, more than the workspace of a small
  // max_tokens); the bound is the larger of that and the steady state. The hybrid's staged
  // layer is not counted here.
  const int64_t workspace =
      spec.hybrid ? models::Qwen35Target::WorkspaceBytes(*spec.hybrid, spec.max_tokens,
                                                         /*on_cuda=*/true, spec.precision)
                  : models::Qwen3Target::WorkspaceBytes(spec.config, spec.max_tokens,
                                                        spec.precision);
  const uint64_t weights = TargetWeightBytes(spec);
  const uint64_t steady = weights + static_cast<uint64_t>(workspace);
  if (spec.precision == models::TargetPrecision::kFp8 && !spec.hybrid) {
    const uint64_t load =
        weights + static_cast<uint64_t>(models::Qwen3Weights::StagingBytes(spec.config));
    if (load > steady) {
      *what = "the target's FP8 weights beside one bf16 layer staged while it loads";
      return load;
    }
  }
  *what = "the target's weights and activation workspace";
  return steady;
}

models::TransformerConfig HybridDrafterConfig(const models::Qwen35Config& c) {
  models::TransformerConfig t;
  t.family = models::ModelFamily::kQwen3;
  t.model_type = "qwen3";
  t.architectures = c.architectures;
  t.vocab_size = c.vocab_size;
  t.hidden_size = c.hidden_size;
  t.num_hidden_layers = c.num_hidden_layers;
  t.num_attention_heads = c.num_attention_heads;
  t.num_key_value_heads = c.num_key_value_heads;
  t.head_dim = c.head_dim;
  // A MoE hybrid has no dense MLP width unless its config gives one: the drafter's MLP then
  // takes 3 x hidden (6144 at hidden 2048, the dense width of Qwen3-30B-A3B's drafters).
  t.intermediate_size = c.intermediate_size > 0 ? c.intermediate_size : 3 * c.hidden_size;
  t.max_position_embeddings = c.max_position_embeddings;
  t.rms_norm_eps = c.rms_norm_eps;
  t.tie_word_embeddings = c.tie_word_embeddings;
  t.rope_theta = c.rope_theta;
  t.rotary_dim = c.head_dim;
  t.layer_types.assign(static_cast<size_t>(c.num_hidden_layers),
                       models::LayerType::kFullAttention);
  t.dtype = c.dtype;
  return t;
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
  dense_.reset();
  hybrid_.reset();
#ifdef TANDEM_HAVE_CUDA
  if (stream_ != nullptr) {
    const auto s = static_cast<cudaStream_t>(stream_);
    CUDA_LOG_IF_ERROR(cudaStreamSynchronize(s));
    CUDA_LOG_IF_ERROR(cudaStreamDestroy(s));
  }
#endif
}

Status SharedTarget::Forward(const models::PackedBatch& batch,
                             std::span<const models::LayerCapture> caps) {
  if (dense_) return dense_->Forward(batch, caps);
  std::vector<models::HybridCapture> hcaps;
  hcaps.reserve(caps.size());
  for (const models::LayerCapture& c : caps) hcaps.push_back({c.layer, c.out});
  return hybrid_->Forward({batch.input_ids, batch.position_ids, batch.cu_seqlens,
                           batch.max_seqlen},
                          hcaps);
}

kernels::Device SharedTarget::device() const {
  return dense_ ? dense_->device() : hybrid_->device();
}
int64_t SharedTarget::max_tokens() const {
  return dense_ ? dense_->max_tokens() : hybrid_->max_tokens();
}
kernels::TensorView SharedTarget::embed() const {
  return dense_ ? dense_->weights().embed() : hybrid_->weights().embed();
}
kernels::TensorView SharedTarget::lm_head() const {
  return dense_ ? dense_->weights().lm_head() : hybrid_->weights().lm_head();
}
kernels::Allocator& SharedTarget::allocator() const {
  return dense_ ? dense_->weights().allocator() : hybrid_->weights().allocator();
}

Result<kernels::Allocator*> JobAllocator(JobRegistry& registry, kernels::Device device) {
  return registry.Get<kernels::DevicePools>().For(device);
}

Result<std::shared_ptr<SharedTarget>> LoadTarget(const TargetModelSpec& spec,
                                                 kernels::Allocator& alloc) {
  const kernels::Device device = alloc.device();
  auto shared = std::make_shared<SharedTarget>();
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) {
    kernels::DeviceGuard guard(device.index);
    cudaStream_t s = nullptr;
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    shared->stream_ = s;
  }
#endif
  if (spec.family == TargetFamily::kHybrid) {
    if (!spec.hybrid) return InternalError("LoadTarget: a hybrid target without its config");
    const models::Qwen35TargetOptions options{spec.max_tokens, shared->stream_, spec.precision};
    if (spec.model == "random") {
      ASSIGN_OR_RETURN(shared->hybrid_,
                       models::Qwen35Target::Random(*spec.hybrid, alloc, spec.seed, options));
    } else {
      ASSIGN_OR_RETURN(shared->hybrid_, models::Qwen35Target::Load(spec.model, alloc, options));
    }
    RETURN_IF_ERROR(kernels::SynchronizeStream(device, shared->stream_));
    return shared;
  }
  models::Qwen3TargetOptions options{spec.max_tokens, shared->stream_, spec.precision};
  if (spec.model == "random") {
    ASSIGN_OR_RETURN(shared->dense_,
                     models::Qwen3Target::Random(spec.config, alloc, spec.seed, options));
  } else {
    ASSIGN_OR_RETURN(shared->dense_, models::Qwen3Target::Load(spec.model, alloc, options));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, shared->stream_));
  return shared;
}

Result<TargetHead> LoadTargetHead(const TargetModelSpec& spec, kernels::Allocator& alloc,
                                  kernels::Stream stream) {
  if (spec.family == TargetFamily::kHybrid) {
    if (!spec.hybrid) return InternalError("LoadTargetHead: a hybrid target without its config");
    ASSIGN_OR_RETURN(models::Qwen35Head h,
                     spec.model == "random"
                         ? models::Qwen35Head::Random(*spec.hybrid, alloc, spec.seed, stream)
                         : models::Qwen35Head::Load(spec.model, *spec.hybrid, alloc, stream));
    return TargetHead(std::move(h));
  }
  ASSIGN_OR_RETURN(models::Qwen3Head h,
                   spec.model == "random"
                       ? models::Qwen3Head::Random(spec.config, alloc, spec.seed, stream)
                       : models::Qwen3Head::Load(spec.model, spec.config, alloc, stream));
  return TargetHead(std::move(h));
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
    if (existing->max_tokens() < spec.max_tokens)
      return InvalidArgumentError("target {} is already loaded with max_tokens {} < {}",
                                  spec.model, existing->max_tokens(), spec.max_tokens);
    return existing;
  }
  ASSIGN_OR_RETURN(kernels::Allocator * alloc, JobAllocator(registry, device));
  ASSIGN_OR_RETURN(std::shared_ptr<SharedTarget> shared, LoadTarget(spec, *alloc));
  table.by_key[key] = shared;
  return shared;
}

}  // namespace tandem::dflash
