// DFlash training step: see dflash_trainer.h.
#include "models/dflash/dflash_trainer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tandem::models {

// Noise draws use a seed distinct from the anchor sampler's (same Philox, other key).
constexpr uint64_t kNoiseSeedSalt = 0x6e6f697365ull;  // "noise"

Result<std::unique_ptr<DFlashTrainer>> DFlashTrainer::Create(const DFlashConfig& config,
                                                             const DFlashTrainOptions& options,
                                                             kernels::Allocator& alloc,
                                                             kernels::Stream stream) {
  std::unique_ptr<DFlashTrainer> t(new DFlashTrainer());
  t->options_ = options;
  t->warmup_ = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(options.warmup_ratio * options.total_steps)));
  DFlashDrafterOptions o{options.max_tokens, options.anchors_per_batch, options.ce_chunk_rows,
                         options.lm_head_fp8};
  o.selector_loss_weight = options.selector_loss_weight;
  ASSIGN_OR_RETURN(t->drafter_, DFlashDrafter::Create(config, o, alloc, stream));
  if (options.optimizer_overlap) RETURN_IF_ERROR(t->drafter_->SetOptimizerOverlap(true));
  return t;
}

void DFlashTrainer::Restore(const DFlashTrainerState& s) {
  step_ = s.step;
  options_.seed = s.seed;
}

float DFlashTrainer::LearningRate(int64_t step) const {
  return DFlashCosineLr(step, options_.total_steps, warmup_, options_.lr, options_.min_lr);
}

Status DFlashTrainer::Step(const DFlashTargetHead& head, const PackedBatchMeta& meta,
                           std::span<const kernels::TensorView> context_layers) {
  RETURN_IF_ERROR(ForwardBackward(head, meta, context_layers));
  return OptimizerStep();
}

Status DFlashTrainer::ForwardBackward(const DFlashTargetHead& head, const PackedBatchMeta& meta,
                                      std::span<const kernels::TensorView> context_layers) {
  const DFlashConfig& c = drafter_->config();
  const uint64_t step = static_cast<uint64_t>(step_);
  ASSIGN_OR_RETURN(std::vector<int32_t> anchors,
                   options_.anchors_per_sequence > 0
                       ? SampleAnchorsPerDocument(meta, options_.anchors_per_sequence,
                                                  options_.anchors_per_batch, options_.seed, step)
                       : SampleAnchors(meta, options_.anchors_per_batch, options_.seed, step));
  ASSIGN_OR_RETURN(DFlashBlockPlan plan,
                   BuildBlockPlan(meta, anchors, options_.anchors_per_batch, c.block_size,
                                  static_cast<int32_t>(c.mask_token_id), options_.loss_decay));
  RETURN_IF_ERROR(drafter_->SetPlan(plan));
  RETURN_IF_ERROR(drafter_->ForwardBackward(head, context_layers, options_.noise_std,
                                            options_.seed ^ kNoiseSeedSalt, step, true));
  return Status::Ok();
}

Status DFlashTrainer::OptimizerStep() {
  kernels::AdamWConfig cfg = options_.adamw;
  cfg.lr = LearningRate(step_);
  RETURN_IF_ERROR(drafter_->OptimizerStep(cfg, options_.grad_clip));
  ++step_;
  return Status::Ok();
}

}  // namespace tandem::models
