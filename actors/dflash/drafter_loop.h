// DrafterLoop: the training loop of one DrafterActor run, once its parts are built
// (drafter_actor.cc): pops HiddenBatches (at least the channel's min_ready at a time),
// checks each batch's metadata checksum and layers, uploads its context, runs forward and
// backward, averages the gradients across data-parallel replicas, applies the optimizer
// step, reads step flags without a sync, logs metrics every `log_every` steps, checkpoints
// every `checkpoint.every_steps` and at the end, and stops at max_steps, at max_seconds, when
// its channel closes, or on a stop request (after checkpointing the steps done).
// Profile stages: drafter.queue_get, drafter.h2d, drafter.forward_backward,
// drafter.allreduce (replicas > 1), drafter.optim (host time: enqueueing on the GPU), and on
// CUDA drafter.gpu.step (GPU time of the step, CUDA events: DrafterDevice::BeginStep);
// drafter.checkpoint.{snapshot,write,wait} (drafter_checkpointer.h: snapshots are ordered
// before the next optimizer update, writes run in the background and are durable before the
// run reports its end or its stop); drafter.eval (the `eval` table: speculative decoding
// between two batches every eval.every_steps, drafter_eval.h; a new best tau with keep_best
// checkpoints that step and points DIR/best at it).
//
// Thread-safety: thread-compatible; the drafter's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/checkpoint/drafter_checkpointer.h"
#include "actors/dflash/drafter_device.h"
#include "actors/dflash/drafter_eval.h"
#include "actors/dflash/drafter_metrics.h"
#include "actors/dflash/dp_positions.h"
#include "actors/dflash/dp_positions_nodes.h"
#include "actors/dflash/drafter_settings.h"
#include "actors/dflash/grad_allreduce.h"
#include "actors/dflash/hidden_batch.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/job/job_actor.h"

namespace tandem::dflash {

// What the loop works with; everything is owned by the caller and outlives the loop.
struct DrafterParts {
  const DrafterSettings* settings = nullptr;
  JobEnv* env = nullptr;
  std::string owner;                      // the actor's name, for logs and errors
  int restarts = 0;                       // of this actor so far (ActorContext::restarts)
  int consumer = 0;                       // its consumer index on the input channel
  int64_t fail_at_step = -1;              // DrafterFaults: the first instance throws there
  std::vector<int64_t> layer_ids;         // the target layers each batch must carry
  models::DFlashTargetHead head;          // the frozen target's embedding and LM head
  models::DFlashTrainer* trainer = nullptr;
  DrafterDevice* dev = nullptr;
  GradientAllReduce* allreduce = nullptr;  // null: a single replica
  // With allreduce, how the replicas' data positions are merged: across the nodes' processes
  // when `dp_nodes` is set, else on the in-process board `dp_positions` of `board_ranks`.
  DataParallelPositions* dp_positions = nullptr;
  std::vector<int> board_ranks;
  DataPositionsAcrossNodes* dp_nodes = nullptr;
  DrafterCheckpointer* checkpointer = nullptr;
  DrafterEval* eval = nullptr;             // null: no `eval` table, or not replica 0
  std::function<void(std::string)> set_stage;  // Actor::SetStage
  std::function<bool()> stop_requested;        // Actor::stop_requested
};

class DrafterLoop {
 public:
  // `start` is the state resumed from (step 0 for a fresh run). REQUIRES: start.step <
  // max_steps.
  DrafterLoop(DrafterParts parts, ResumeState start);

  // Trains to the end and returns the summary line, or the error (Cancelled on a stop).
  Result<std::string> Run();

 private:
  // One popped batch: train on it. Sets done_ when the run should end after it.
  Status TrainOn(HiddenBatch& hb);
  // Applies the finite/non-finite flags of finished steps (with `wait`, of all steps).
  Status CheckFlags(bool wait);
  Status LogMetrics();
  // The eval after this step; a new best tau with keep_best is checkpointed now.
  Status Evaluate();
  // After a stop request: checkpoint what is new, then Cancelled.
  Status Stopped();
  bool Stopping() const;
  // After the last step: close and drain the channel, wait for the device, checkpoint.
  Result<std::string> Finish(Channel<HiddenBatch>& channel);
  Result<uint64_t> WeightsHash();
  // ", checkpoints ..." for the summary ("" when none was written).
  std::string CheckpointNote() const;

  DrafterParts p_;
  const DrafterSettings& s_;
  ResumeState state_;
  const int64_t first_step_;
  int64_t logged_step_ = -1;  // the step whose metrics LogMetrics read last
  DrafterMetricsLog metrics_;
  StageHandle get_stage_, fb_stage_, optim_stage_, h2d_stage_;
  std::optional<StageHandle> ar_stage_;
  bool done_ = false;
  int64_t bad_in_row_ = 0, bad_total_ = 0, mismatches_ = 0, run_tokens_ = 0;
  int64_t t0_ = 0;
  int64_t steady_t0_ = 0, steady_tokens_ = 0;  // from the end of the first step
};

}  // namespace tandem::dflash
