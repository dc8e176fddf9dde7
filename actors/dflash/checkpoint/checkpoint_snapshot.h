// CheckpointSnapshot: a consistent copy of a drafter's training state (bf16 weights, fp32
// master weights, AdamW moments, AdamW step) in host memory, taken without stopping
// training, for DrafterCheckpointer's background writes.
//
// CPU: Take copies into page-aligned host buffers and is done when it returns.
// CUDA: the buffers are pinned. Take records an event on the drafter's compute stream after
// the step's optimizer update, makes a copy stream of its own wait for it, and enqueues the
// device-to-host copies there; the compute stream goes on with the next forward and
// backward, which only read the weights. BeforeUpdate (call it before every optimizer
// update) makes the compute stream wait for the copies once after each Take, so the next
// update cannot change the weights under the copy: the snapshot is the state at its step,
// bit for bit. WaitCopied blocks until the copies are done.
//
// The buffers are allocated once, by Create: DFlashHostState::Bytes(layout) of them, which
// the caller counts against its pinned budget.
//
// Thread-safety: Take and BeforeUpdate on the drafter's thread; WaitCopied and host() on
// any one thread between a Take and the next one (the caller orders them).
#pragma once

#include <memory>

#include "models/dflash/dflash_checkpoint.h"
#include "runtime/core/status.h"

namespace tandem::dflash {

class CheckpointSnapshot {
 public:
  // Buffers for `layout` for a drafter on `device`.
  static Result<std::unique_ptr<CheckpointSnapshot>> Create(
      const models::DFlashParamLayout& layout, kernels::Device device);
  virtual ~CheckpointSnapshot() = default;

  // Starts copying the drafter's state as of the work queued on its stream so far.
  virtual Status Take(models::DFlashDrafter& drafter) = 0;
  // Before an optimizer update enqueued on `compute`: orders it after a pending copy.
  virtual Status BeforeUpdate(kernels::Stream compute) = 0;
  // Waits until the last Take's copy is complete; returns how long the copy took (seconds;
  // on the GPU its time on the copy stream).
  virtual Result<double> WaitCopied() = 0;
  // The copied state; valid after WaitCopied.
  virtual const models::DFlashHostState& host() const = 0;
};

}  // namespace tandem::dflash
