// One DFlash training step as a trainer runs it: sample anchors (Philox keyed by seed and
// step; per batch, or per document with anchors_per_sequence), build and upload the block
// plan, forward + loss + backward with context noise,
// then grad clip and AdamW at the cosine-with-warmup learning rate of that step.
// Everything after the plan upload is queued on the drafter's stream with no host sync;
// loss, correctness and grad stats stay on the device (read them every N steps).
//
// Thread-safety: thread-compatible (one driving thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/optim/adamw_types.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_drafter.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct DFlashTrainOptions {
  int64_t max_tokens = 16384;
  int64_t anchors_per_batch = 512;  // the step's blocks (a fixed shape; unused ones pad)
  // > 0: at most this many anchors per document (SampleAnchorsPerDocument), and at most
  // anchors_per_batch in all; 0: anchors_per_batch spread over the batch (SampleAnchors).
  int64_t anchors_per_sequence = 0;
  double loss_decay = 7.0;  // gamma of the slot weights exp(-(j-1)/gamma)
  int64_t total_steps = 1000;
  double warmup_ratio = 0.04;  // warmup steps = max(1, round(ratio * total_steps))
  float lr = 6e-4f;
  float min_lr = 0.0f;
  kernels::AdamWConfig adamw;  // lr is replaced by the schedule
  float grad_clip = 1.0f;
  float noise_std = 0.05f;
  uint64_t seed = 0;
  int64_t ce_chunk_rows = 2048;
  // AdamW on a second stream, overlapping the next forward (DFlashDrafter::OptimizerStep).
  bool optimizer_overlap = false;
  bool lm_head_fp8 = false;  // DFlashDrafterOptions::lm_head_fp8
  float selector_loss_weight = 1.0f;  // DFlashDrafterOptions::selector_loss_weight (DFlash2)
};

class DFlashTrainer {
 public:
  // The drafter (DFlashDrafter::Create) from `alloc`. REQUIRES: `alloc` outlives the trainer.
  static Result<std::unique_ptr<DFlashTrainer>> Create(const DFlashConfig& config,
                                                       const DFlashTrainOptions& options,
                                                       kernels::Allocator& alloc,
                                                       kernels::Stream stream);

  DFlashDrafter& drafter() { return *drafter_; }
  const DFlashTrainOptions& options() const { return options_; }
  DFlashTrainerState state() const { return {step_, options_.seed}; }
  // After loading a checkpoint: continue from its step (and RNG seed).
  void Restore(const DFlashTrainerState& s);
  float LearningRate(int64_t step) const;

  // One step on a batch: meta on the host; context layers bf16 [T, H] on the device.
  // Same as ForwardBackward then OptimizerStep.
  Status Step(const DFlashTargetHead& head, const PackedBatchMeta& meta,
              std::span<const kernels::TensorView> context_layers);

  // The two halves of Step, for data-parallel training: between them the caller may
  // all-reduce drafter().params().grads (f32 [N], the whole gradient in one flat buffer)
  // on the drafter's stream. OptimizerStep clips, applies AdamW at the step's LR, step += 1.
  Status ForwardBackward(const DFlashTargetHead& head, const PackedBatchMeta& meta,
                         std::span<const kernels::TensorView> context_layers);
  Status OptimizerStep();

 private:
  DFlashTrainOptions options_;
  std::unique_ptr<DFlashDrafter> drafter_;
  int64_t step_ = 0;
  int64_t warmup_ = 1;
};

}  // namespace tandem::models
