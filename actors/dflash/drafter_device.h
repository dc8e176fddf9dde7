// DrafterDevice: where a DrafterActor's trainer runs, how each HiddenBatch's context layers
// reach it, and how step results come back without per-step host syncs.
//
// CPU: the context is a view of the host objects; step flags are read at once.
// CUDA: the trainer runs on the device's own compute stream. Two context sets of k device
// buffers bf16 [max_tokens, H] are allocated once; Upload copies the layers of a batch into
// the next set on a copy stream through ObjectStore::CopyOut (whose fence keeps the host
// objects alive even after the batch is dropped), after the step that last read that set,
// and makes the compute stream wait for the copies. AfterStep enqueues a copy of the step's
// loss and grad stats into a pinned ring; Resolved reports the finished ones in step order
// (non-blocking unless asked). ReadMetrics is the only routine sync (every log_every steps).
//
// Thread-safety: thread-compatible; the actor's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/dflash/hidden_batch.h"
#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "models/dflash/dflash_drafter.h"
#include "runtime/job/job_actor.h"

namespace tandem::dflash {

// On CUDA, the context layers of this many batches are on the device at once (one being
// filled by the copy stream while the drafter reads the other): bf16 [max_tokens, H] each.
inline constexpr int kDrafterContextSets = 2;

struct StepFlags {
  int64_t step = 0;       // 1-based step number
  bool finite = true;     // loss and every gradient finite
};

struct StepMetrics {
  float loss = 0;
  float grad_stats[4] = {};     // kernels/optim/adamw_types.h layout
  std::vector<uint8_t> correct; // [rows]
  // DFlash2 only (has_selector): DFlashDrafter::selector_loss() and selector_stats()
  // {covered, correct}, and the step's loss rows (DFlashDrafter::loss_rows()).
  bool has_selector = false;
  float selector_loss = 0;
  int32_t selector_stats[2] = {};
  int64_t loss_rows = 0;
};

class DrafterDevice {
 public:
  // On `alloc`'s device; the context sets come from `alloc` (the job's pool of that device).
  // REQUIRES: `alloc` and `env` outlive the DrafterDevice.
  static Result<std::unique_ptr<DrafterDevice>> Create(kernels::Allocator& alloc, int64_t layers,
                                                       int64_t max_tokens, int64_t hidden,
                                                       JobEnv* env);
  virtual ~DrafterDevice() = default;
  // The stream the trainer runs on (null on the CPU).
  virtual kernels::Stream stream() const = 0;
  // The batch's context layers, bf16 [T, H] each, ready for work on stream().
  virtual Result<std::vector<kernels::TensorView>> Upload(const HiddenBatch& hb) = 0;
  // Bracket one step's work on stream(): BeginStep after Upload, EndStep after the
  // optimizer step. On CUDA they time the GPU stage drafter.gpu.step (CUDA events: the
  // drafter's GPU busy time, which runtime/job's bottleneck verdict weighs against a target
  // sharing the GPU); no-ops on the CPU, whose work is synchronous and wall-timed.
  virtual void BeginStep() {}
  virtual void EndStep() {}
  // Call right after the trainer's step number `step` (1-based).
  virtual Status AfterStep(int64_t step, models::DFlashDrafter& d) = 0;
  // Flags of finished steps, oldest first; with `wait`, of every step so far.
  virtual Result<std::vector<StepFlags>> Resolved(bool wait) = 0;
  // The last step's loss, grad stats and per-row correctness (waits for the device).
  virtual Result<StepMetrics> ReadMetrics(models::DFlashDrafter& d) = 0;
  // Waits for all queued work (checkpoints, timing).
  virtual Status Synchronize() = 0;
};

}  // namespace tandem::dflash
