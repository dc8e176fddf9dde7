// The frozen target of a DFlash job as actors share it: which model a job names (an HF
// directory, or random weights of a given config for tests and benchmarks), and a
// process-wide table that loads each (job run, model, device) once, so a target and a drafter
// of one job that share a GPU (colocation) share one copy of the weights. Jobs never share
// an entry: two jobs of one daemon each get their own target and forward claim. The drafter reads the target's
// embedding and LM head from it; the first TargetActor on a device claims its forward.
//
// Thread-safety: AcquireTarget and the Claim methods are safe from any thread; a
// SharedTarget's model is immutable after load except through Forward, which only the
// actor holding the forward claim calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "models/io/hf_config.h"
#include "models/qwen3/qwen3_target.h"
#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

struct TargetModelSpec {
  std::string model;                // HF directory, or "random"
  models::TransformerConfig config; // loaded from `model` or built from `target_config`
  uint64_t seed = 0;                // random weights' Philox stream
  int64_t max_tokens = 0;           // largest packed batch
  std::vector<int64_t> layer_ids;   // captured layers
  models::TargetPrecision precision = models::TargetPrecision::kBf16;  // `precision` key
  std::string Key() const;          // identifies the weights (not max_tokens)
};

// Reads `model`, `target_config` (table of HF config.json keys, for model = "random"),
// `seed` (default: job seed), `max_tokens`, `layers` (default DFlashTargetLayerIds(n,
// `num_context_layers` default 5)) and `precision` ("bf16" default, or "fp8": block-scaled
// e4m3 projections, sm_90+ only; an FP8 checkpoint with "bf16" is dequantized at load) from
// a dflash.target section.
Result<TargetModelSpec> ParseTargetModelSpec(const ConfigValue& section, int64_t job_seed);

// One loaded target on one device. `stream` is the stream its forwards run on (owned here on
// CUDA, created with the model; null on the CPU).
class SharedTarget {
 public:
  ~SharedTarget();
  models::Qwen3Target& model() { return *model_; }
  kernels::Stream stream() const { return stream_; }
  // True for the first caller only: it may run Forward on model() until ReleaseForward().
  bool ClaimForward() { return !forward_claimed_.exchange(true); }
  void ReleaseForward() { forward_claimed_.store(false); }

 private:
  friend Result<std::shared_ptr<SharedTarget>> AcquireTarget(const TargetModelSpec&,
                                                             kernels::Device, uint64_t);
  std::unique_ptr<models::Qwen3Target> model_;
  kernels::Stream stream_ = nullptr;
  std::atomic<bool> forward_claimed_{false};
};

// The target of `spec` on `device` for the job run `run_id` (JobEnv::run_id), loaded on
// first use and shared while anyone holds it.
Result<std::shared_ptr<SharedTarget>> AcquireTarget(const TargetModelSpec& spec,
                                                    kernels::Device device, uint64_t run_id);

// The device an actor on GPU `gpu` (-1: none) runs its model on.
kernels::Device ActorDevice(int gpu);

}  // namespace tandem::dflash
