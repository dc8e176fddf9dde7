// DrafterEval: the drafter group's `eval` table (drafter_eval_settings.h) at work. Every
// eval.every_steps training steps (and after the last one, with at_end), the drafter being
// trained is measured by real DFlash speculative decoding (models/speculative's
// DFlashDecoder, the loop `tandem eval` runs) on held-out prompts: tau (mean accepted drafts
// + 1 per verify step), acceptance by block position and generated tokens per second go to
// the job's metrics (an "eval" record, `tandem status`, Prometheus) and the log; the highest
// tau so far is remembered for keep_best (drafter_eval_best.h, DrafterCheckpointer::MarkBest).
//
// Where it runs, and why there: on the drafter's own thread, between two batches, on
// replica 0 only. The weights at a step exist there and nowhere else: the decoder reads the
// trained drafter's bf16 compute copy in place (a forward-only DFlashDrafter over
// DFlashDrafterOptions::shared_weights, on the same stream, after JoinOptimizer), so the eval needs
// no weight copy and never races the optimizer. A DFlash2 drafter proposes with its
// candidate selector, as `tandem eval` does (models/speculative/dflash2_proposal.h). The
// price is that training pauses while it decodes (other data-parallel replicas wait at the
// next all-reduce; the targets fill the channel and wait): its budget is bounded by
// max_prompts x max_new_tokens and, optionally, max_seconds, and its time shows as the
// profile stage `drafter.eval` (and in the verdict when it holds the loop for a large share
// of the wall).
//
// The target: the decoder needs the target with its decode cache. Its weights are shared, not
// copied: a second models::Qwen3Target over Qwen3Weights::Alias of the job's loaded target
// (for a Qwen3.5 hybrid, a second models::Qwen35Target over Qwen35Weights::Alias; with
// precision = "fp8", either family's over the e4m3 projections' alias too: the decoder runs
// the target as the job does)
// (AcquireTarget: the target replica's copy on this device, or when no replica runs here,
// one loaded once on this device for the drafter's embedding and LM head as well), with its
// own workspace so it never touches the buffers of the target actor's forwards. Memory of its
// own, allocated once at Create from the job's pool (where the target's weights and the
// trained drafter came from): the KV cache (2 x layers x context x kv_dim bf16), the
// captured features (k x context x hidden bf16), the two workspaces (the target's for the
// longest prompt, the drafter's for one block over the context), a [16, vocab] f32 logits
// buffer and, for a DFlash2 drafter, the proposer's buffers (models/speculative/
// dflash2_proposal.h: its own [16, vocab] f32 logits, the top-k candidates and the selector
// projection), where context = longest prompt + max_new_tokens + block size. Create logs
// the sum.
// For Qwen3-8B at a 2048-token context: 0.28 GiB of cache + 0.08 GiB of features (k = 5).
//
// Thread-safety: thread-compatible; the drafter's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/dflash/drafter_eval_best.h"
#include "actors/dflash/drafter_eval_settings.h"
#include "actors/dflash/target_model.h"
#include "models/dflash/dflash_drafter.h"
#include "models/qwen3/qwen3_target.h"
#include "models/speculative/dflash_decoder.h"
#include "models/speculative/spec_eval.h"
#include "runtime/job/job_metrics.h"
#include "runtime/profile/profile_stats.h"

namespace tandem::dflash {

struct EvalResult {
  models::SpecEvalStats stats;
  bool new_best = false;  // tau above every earlier evaluation's of this run (and resume's)
};

class DrafterEval {
 public:
  // Reads the prompt file (its problems are errors here, before training starts: a file with
  // no usable prompt, ids outside the target's vocab are skipped and counted) and allocates
  // the decoder. `trained` is the drafter being trained (it and `target` must outlive this);
  // `metrics` may be null; `profile` gets the stage drafter.eval; `seed` draws the target's
  // samples at temperature > 0 (the same draws every evaluation).
  static Result<std::unique_ptr<DrafterEval>> Create(const EvalSettings& settings,
                                                     std::shared_ptr<SharedTarget> target,
                                                     models::DFlashDrafter& trained,
                                                     JobMetrics* metrics, ProfileStats* profile,
                                                     std::string owner, uint64_t seed);

  // What Create allocates besides the shared weights, from the settings alone (the terms
  // above, for a prompt of eval.max_prompt_tokens, the longest Create accepts): the bound the
  // drafter group adds to the validation's device-memory check when it has an eval table.
  static Result<int64_t> DeviceBytesBound(const EvalSettings& settings,
                                          const TargetModelSpec& target,
                                          const models::DFlashConfig& drafter);

  // True when an evaluation is due after training step `step`; `last`: the run ends there.
  bool Due(int64_t step, bool last) const;
  // Decodes the prompts with the weights after `step` and records the result.
  Result<EvalResult> Run(int64_t step);

  // A run resumed at `step` continues from the best of the run it resumes: DIR/best when it
  // names a step up to `step` (a newer one was never part of this run's past).
  Status ResumeBest(const std::string& checkpoint_dir, int64_t step);
  const std::optional<BestCheckpoint>& best() const { return best_; }
  const EvalSettings& settings() const { return s_; }
  // "evals 3, last tau 4.21 at step 240, best 4.30 at step 200"; "" before the first.
  std::string Summary() const;

 private:
  DrafterEval(const EvalSettings& s, StageHandle stage) : s_(s), stage_(stage) {}
  Status Allocate(const SharedTarget& target, models::DFlashDrafter& trained);

  const EvalSettings s_;
  StageHandle stage_;
  std::shared_ptr<SharedTarget> shared_;  // keeps the weights the alias reads alive
  models::DFlashDrafter* trained_ = nullptr;
  JobMetrics* metrics_ = nullptr;
  std::string owner_;
  uint64_t seed_ = 0;
  models::PromptSet prompts_;
  int64_t max_context_ = 0;
  std::vector<int32_t> stop_ids_;
  std::unique_ptr<models::Qwen3Target> target_;     // over the job's weights (Alias), or
  std::unique_ptr<models::Qwen35Target> hybrid_;    // the same for a hybrid target
  std::unique_ptr<models::DFlashDrafter> drafter_;  // over the trained drafter's weights
  std::unique_ptr<models::DFlashDecoder> decoder_;
  std::optional<BestCheckpoint> best_;
  int64_t runs_ = 0, last_step_ = -1;
  double last_tau_ = 0;
};

}  // namespace tandem::dflash
