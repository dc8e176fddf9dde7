// The frozen target of a DFlash job as actors share it: which model a job names (an HF
// directory, or random weights of a given config for tests and benchmarks), and the job's
// table (in its JobRegistry) that loads each (model, device) once, so the target replicas of
// a job never load one twice. The first TargetActor on a device claims its forward.
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
#include "runtime/core/status.h"
#include "runtime/job/job_registry.h"

namespace tandem::dflash {

struct TargetModelSpec {
  std::string model;                // HF directory, or "random"
  models::TransformerConfig config; // loaded from `model` or built from `target_config`
  uint64_t seed = 0;                // random weights' Philox stream
  int64_t max_tokens = 0;           // largest packed batch
  std::vector<int64_t> layer_ids;   // captured layers
  std::string Key() const;          // identifies the weights (not max_tokens)
};

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
  friend Result<std::shared_ptr<SharedTarget>> LoadTarget(const TargetModelSpec&,
                                                          kernels::Device);
  std::unique_ptr<models::Qwen3Target> model_;
  kernels::Stream stream_ = nullptr;
  std::atomic<bool> forward_claimed_{false};
};

// The target of `spec` on `device` in the job of `registry`, loaded on first use and shared
// while anyone holds it.
Result<std::shared_ptr<SharedTarget>> AcquireTarget(JobRegistry& registry,
                                                    const TargetModelSpec& spec,
                                                    kernels::Device device);
// A new copy of the target of `spec` on `device`, not shared.
Result<std::shared_ptr<SharedTarget>> LoadTarget(const TargetModelSpec& spec,
                                                 kernels::Device device);

// The device an actor on GPU `gpu` (-1: none) runs its model on.
kernels::Device ActorDevice(int gpu);

}  // namespace tandem::dflash
