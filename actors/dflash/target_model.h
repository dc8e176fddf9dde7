// The frozen target of a DFlash job as actors share it: which model a job names (an HF
// directory, or random weights of a given config for tests and benchmarks), and the job's
// table (in its JobRegistry) that loads each (model, device) once, so the target replicas of
// a job never load one twice. The first TargetActor on a device claims its forward.
//
// Two target families, chosen by the checkpoint's config.json (`model_type`; for "random",
// target_config's): dense Qwen3 / Llama-3 (models/qwen3) and the Qwen3.5 / Qwen3.6 hybrid
// (models/qwen3_5: Gated DeltaNet + gated attention). SharedTarget hides which one runs.
//
// Thread-safety: AcquireTarget and the Claim methods are safe from any thread; a
// SharedTarget's model is immutable after load except through Forward, which only the
// actor holding the forward claim calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/core/memory.h"
#include "models/io/hf_config.h"
#include "models/qwen3/qwen3_head.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_weights.h"
#include "runtime/core/status.h"
#include "runtime/job/job_registry.h"

namespace tandem::dflash {

enum class TargetFamily : uint8_t { kDense, kHybrid };  // models/qwen3, models/qwen3_5

struct TargetModelSpec {
  std::string model;                // HF directory, or "random"
  TargetFamily family = TargetFamily::kDense;
  // What the drafter reads (vocab, hidden and MLP sizes, eps, RoPE theta, layer count, the
  // attention shape a drafter layer copies): the dense target's config, or, for a hybrid,
  // HybridDrafterConfig(*hybrid).
  models::TransformerConfig config;
  std::optional<models::Qwen35Config> hybrid;  // set iff family == kHybrid
  uint64_t seed = 0;                // random weights' Philox stream
  int64_t max_tokens = 0;           // largest packed batch
  std::vector<int64_t> layer_ids;   // captured layers
  models::TargetPrecision precision = models::TargetPrecision::kBf16;  // `precision` key
  std::string Key() const;          // identifies the weights (not max_tokens)
};

// The TransformerConfig a drafter trained against hybrid `c` reads: its vocab, hidden and
// MLP sizes, eps, RoPE theta and layer count, with the attention shape of its gated
// attention layers (heads, KV heads, head_dim, full rotary) and every layer full attention.
// A MoE hybrid without an `intermediate_size` gives the drafter an MLP of 3 x hidden_size.
models::TransformerConfig HybridDrafterConfig(const models::Qwen35Config& c);

// The bytes of `spec`'s weights on the device, from the shapes alone (every layer's weights
// are loaded): 2 per element in bf16; with precision = "fp8", 1 per element of the layers'
// 2-d projections (their block scales not counted) and 2 for the rest. A lower bound of what
// loading the target takes.
uint64_t TargetWeightBytes(const TargetModelSpec& spec);
// TargetWeightBytes plus the activation workspace the target allocates on a GPU for
// max_tokens (either family), or, for a Qwen3 / Qwen3-MoE target with precision = "fp8"
// whose largest staged bf16 layer (Qwen3Weights::StagingBytes) exceeds that workspace,
// TargetWeightBytes plus that layer (the load's peak); `what` says what is counted.
uint64_t TargetDeviceBytes(const TargetModelSpec& spec, std::string* what);

// One loaded target on one device. `stream` is the stream its forwards run on (owned here on
// CUDA, created with the model; null on the CPU).
class SharedTarget {
 public:
  ~SharedTarget();
  // The forward of whichever family was loaded (models::Qwen3Target::Forward's contract).
  Status Forward(const models::PackedBatch& batch, std::span<const models::LayerCapture> caps);
  kernels::Device device() const;
  int64_t max_tokens() const;
  kernels::TensorView embed() const;    // bf16 [V, H], the frozen token embedding
  kernels::TensorView lm_head() const;  // bf16 [V, H]
  kernels::Stream stream() const { return stream_; }
  // The dense model (null for a hybrid), read-only: e.g. its weights for a decoder of its
  // own (models::Qwen3Weights::Alias, actors/dflash/drafter_eval.h).
  const models::Qwen3Target* dense() const { return dense_.get(); }
  // The hybrid model (null for a dense one), read-only, likewise (Qwen35Weights::Alias).
  const models::Qwen35Target* hybrid() const { return hybrid_.get(); }
  // Where the weights came from (the job's pool of device()); buffers that work with the
  // target's forward are allocated there too.
  kernels::Allocator& allocator() const;
  // True for the first caller only: it may run Forward on model() until ReleaseForward().
  bool ClaimForward() { return !forward_claimed_.exchange(true); }
  void ReleaseForward() { forward_claimed_.store(false); }

 private:
  friend Result<std::shared_ptr<SharedTarget>> LoadTarget(const TargetModelSpec&,
                                                          kernels::Allocator&);
  std::unique_ptr<models::Qwen3Target> dense_;    // one of the two is set
  std::unique_ptr<models::Qwen35Target> hybrid_;
  kernels::Stream stream_ = nullptr;
  std::atomic<bool> forward_claimed_{false};
};

// The allocator of `device` in the job of `registry`: the job's caching pool of that GPU
// (kernels/core/device_pools.h, kept in the registry and freed with it), or host memory.
// Every device tensor of a job's actors comes from here, so jobs never share cached memory.
Result<kernels::Allocator*> JobAllocator(JobRegistry& registry, kernels::Device device);

// The target of `spec` on `device` in the job of `registry` (in the job's pool of `device`),
// loaded on first use and shared while anyone holds it.
Result<std::shared_ptr<SharedTarget>> AcquireTarget(JobRegistry& registry,
                                                    const TargetModelSpec& spec,
                                                    kernels::Device device);
// A new copy of the target of `spec` in memory from `alloc`, not shared.
// REQUIRES: `alloc` outlives the target.
Result<std::shared_ptr<SharedTarget>> LoadTarget(const TargetModelSpec& spec,
                                                 kernels::Allocator& alloc);

// The embedding and LM head of either family.
class TargetHead {
 public:
  explicit TargetHead(models::Qwen3Head h) : head_(std::move(h)) {}
  explicit TargetHead(models::Qwen35Head h) : head_(std::move(h)) {}
  kernels::TensorView embed() const {
    return std::visit([](const auto& h) { return h.embed(); }, head_);
  }
  kernels::TensorView lm_head() const {
    return std::visit([](const auto& h) { return h.lm_head(); }, head_);
  }

 private:
  std::variant<models::Qwen3Head, models::Qwen35Head> head_;
};

// The target's embedding and LM head alone (models/qwen3/qwen3_head.h, or Qwen35Head), for
// a drafter on a GPU without a target replica: loaded from spec.model, or the random
// model's, into memory from `alloc` (ordered on `stream`, complete on return).
// REQUIRES: `alloc` outlives it.
Result<TargetHead> LoadTargetHead(const TargetModelSpec& spec, kernels::Allocator& alloc,
                                         kernels::Stream stream);

// The device an actor on GPU `gpu` (-1: none) runs its model on.
kernels::Device ActorDevice(int gpu);

}  // namespace tandem::dflash
