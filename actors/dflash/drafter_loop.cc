#include "actors/dflash/drafter_loop.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "kernels/core/memory.h"
#include "runtime/core/clock.h"

namespace tandem::dflash {

DrafterLoop::DrafterLoop(DrafterParts parts, ResumeState start)
    : p_(std::move(parts)),
      s_(*p_.settings),
      state_(std::move(start)),
      first_step_(state_.step),
      metrics_(p_.env->metrics, p_.owner, p_.trainer->drafter().config().block_size,
               s_.max_steps),
      get_stage_(p_.env->profile->Stage("drafter.queue_get")),
      fb_stage_(p_.env->profile->Stage("drafter.forward_backward")),
      optim_stage_(p_.env->profile->Stage("drafter.optim")),
      h2d_stage_(p_.env->profile->Stage("drafter.h2d")) {
  if (p_.allreduce != nullptr) ar_stage_ = p_.env->profile->Stage("drafter.allreduce");
}

bool DrafterLoop::Stopping() const { return p_.env->stopping() || p_.stop_requested(); }

Result<std::string> DrafterLoop::Run() {
  ASSIGN_OR_RETURN(auto channel, p_.env->channels->Open<HiddenBatch>(s_.in));
  const ChannelSpec* cs = p_.env->job->FindChannel(s_.in);
  const size_t min_ready = cs != nullptr ? static_cast<size_t>(cs->min_ready) : 1;
  t0_ = NowNanos();
  metrics_.SetStep(state_.step);
  while (!done_) {
    p_.set_stage("drafter.queue_get");
    ScopedTimer wait(get_stage_);
    Result<std::vector<HiddenBatch>> popped = channel->PopBatchAs(
        p_.consumer, min_ready, std::max<size_t>(min_ready, 1) * 4, std::chrono::milliseconds(200));
    wait.Stop();
    if (!popped.ok()) {
      if (popped.status().code() == StatusCode::kDeadlineExceeded) {
        if (Stopping()) return Stopped();
        continue;
      }
      break;  // closed and drained
    }
    for (HiddenBatch& hb : *popped) {
      if (done_) break;  // leftovers are dropped; their refs go with them
      RETURN_IF_ERROR(TrainOn(hb));
      if (Stopping()) return Stopped();
    }
  }
  if (p_.allreduce != nullptr && state_.step < s_.max_steps)
    return UnavailableError("{}: its input channel closed at step {}, before max_steps = {}; "
                            "the other data-parallel replicas cannot go on without it",
                            p_.owner, state_.step, s_.max_steps);
  return Finish(*channel);
}

Status DrafterLoop::TrainOn(HiddenBatch& hb) {
  if (hb.tokens.Checksum() != hb.checksum) {
    ++mismatches_;
    return DataLossError("{}: batch {} from target/{} fails its metadata checksum", p_.owner,
                         hb.tokens.index, hb.source_replica);
  }
  if (hb.layer_ids != p_.layer_ids)
    return InvalidArgumentError("{}: batch carries layers [{}], expected [{}]", p_.owner,
                                fmt::join(hb.layer_ids, ","), fmt::join(p_.layer_ids, ","));
  models::DFlashTrainer& trainer = *p_.trainer;
  const int64_t t = hb.tokens.tokens();
  p_.set_stage("drafter.h2d");
  ScopedTimer h2d_timer(h2d_stage_);
  ASSIGN_OR_RETURN(std::vector<kernels::TensorView> ctx, p_.dev->Upload(hb));
  h2d_timer.Stop();
  p_.dev->BeginStep();  // the GPU stage drafter.gpu.step, until the optimizer step is queued
  {
    p_.set_stage("drafter.forward_backward");
    ScopedTimer timer(fb_stage_);
    const auto& b = hb.tokens;
    models::PackedBatchMeta meta{b.input_ids, b.position_ids, b.cu_seqlens, b.loss_mask};
    RETURN_IF_ERROR(trainer.ForwardBackward(p_.head, meta, ctx));
  }
  TargetPositions mine = state_.positions;  // through this step's batch
  mine[hb.writer] = hb.next_position;
  if (p_.allreduce != nullptr) {
    // On the board before the all-reduce: once it returns, every replica's are in.
    if (p_.dp_nodes == nullptr)
      p_.dp_positions->Publish(p_.allreduce->rank(), state_.step + 1, mine);
    p_.set_stage("drafter.allreduce");
    ScopedTimer timer(*ar_stage_);
    RETURN_IF_ERROR(p_.allreduce->AllReduceAvg(trainer.drafter().params().grads.view(),
                                               p_.dev->stream()));
  }
  {
    p_.set_stage("drafter.optim");
    ScopedTimer timer(optim_stage_);
    RETURN_IF_ERROR(p_.checkpointer->BeforeUpdate(p_.dev->stream()));  // after a snapshot
    RETURN_IF_ERROR(trainer.OptimizerStep());
  }
  p_.dev->EndStep();
  // An injected fault (drafter_faults.h): the first instance of the actor throws once here.
  if (p_.fail_at_step >= 0 && state_.step + 1 == p_.fail_at_step && p_.restarts == 0)
    throw std::runtime_error(
        fmt::format("fail_at_step={} reached (deliberate)", p_.fail_at_step));
  ++state_.step;
  state_.tokens += t;
  run_tokens_ += t;
  state_.positions = std::move(mine);
  // Every replica's batches of this step, so the checkpoint covers all of them.
  if (p_.dp_nodes != nullptr) {
    ASSIGN_OR_RETURN(state_.positions, p_.dp_nodes->Exchange(state_.positions));
  } else if (p_.allreduce != nullptr) {
    ASSIGN_OR_RETURN(state_.positions, p_.dp_positions->Merged(state_.step, p_.board_ranks));
  }
  RETURN_IF_ERROR(p_.dev->AfterStep(state_.step, trainer.drafter()));
  metrics_.SetStep(state_.step);
  RETURN_IF_ERROR(p_.checkpointer->Poll(state_.step));  // a failed background write
  RETURN_IF_ERROR(CheckFlags(/*wait=*/false));
  if (steady_t0_ == 0) {
    RETURN_IF_ERROR(p_.dev->Synchronize());  // once: the first step includes warm-up
    steady_t0_ = NowNanos();
  } else {
    steady_tokens_ += t;
  }
  if (s_.max_seconds > 0 && (NowNanos() - steady_t0_) * 1e-9 >= s_.max_seconds) done_ = true;
  if (state_.step % s_.log_every == 0 || state_.step == s_.max_steps || done_)
    RETURN_IF_ERROR(LogMetrics());
  if (p_.eval != nullptr && p_.eval->Due(state_.step, done_ || state_.step >= s_.max_steps))
    RETURN_IF_ERROR(Evaluate());
  if (s_.checkpoint_every > 0 && state_.step % s_.checkpoint_every == 0) {
    p_.set_stage("drafter.checkpoint");
    RETURN_IF_ERROR(p_.checkpointer->Save(state_, *p_.dev, trainer));
  }
  if (state_.step >= s_.max_steps) done_ = true;
  return Status::Ok();
}

Status DrafterLoop::Evaluate() {
  p_.set_stage("drafter.eval");
  ASSIGN_OR_RETURN(const EvalResult r, p_.eval->Run(state_.step));
  if (!r.new_best || !p_.eval->settings().keep_best || !p_.checkpointer->enabled())
    return Status::Ok();
  p_.checkpointer->MarkBest(*p_.eval->best());
  p_.set_stage("drafter.checkpoint");
  return p_.checkpointer->Save(state_, *p_.dev, *p_.trainer);
}

Status DrafterLoop::CheckFlags(bool wait) {
  ASSIGN_OR_RETURN(std::vector<StepFlags> flags, p_.dev->Resolved(wait));
  for (const StepFlags& f : flags) {
    if (f.finite) {
      bad_in_row_ = 0;
      continue;
    }
    ++bad_total_;
    if (++bad_in_row_ >= s_.max_bad_steps)
      return InternalError("{}: {} non-finite steps in a row, the last at step {} (stages "
                           "drafter.forward_backward / drafter.allreduce: loss or gradients "
                           "NaN/Inf)", p_.owner, bad_in_row_, f.step);
  }
  return Status::Ok();
}

Status DrafterLoop::LogMetrics() {
  ASSIGN_OR_RETURN(StepMetrics m, p_.dev->ReadMetrics(p_.trainer->drafter()));
  RETURN_IF_ERROR(CheckFlags(/*wait=*/true));
  const double secs = (NowNanos() - t0_) * 1e-9;
  metrics_.Log(state_.step, m, p_.trainer->LearningRate(state_.step - 1),
               run_tokens_ / std::max(secs, 1e-9));
  logged_step_ = state_.step;
  return Status::Ok();
}

// A stop request (Ctrl-C on `tandem run`, `tandem stop`) ends the run gracefully: the steps
// done so far are checkpointed, so `resume = true` continues from here.
Status DrafterLoop::Stopped() {
  DrafterCheckpointer& ck = *p_.checkpointer;
  p_.set_stage("drafter.checkpoint");
  // Durable before the stop is reported (also a write still in flight).
  RETURN_IF_ERROR(ck.SaveAndFlush(state_, *p_.dev, *p_.trainer));
  return CancelledError("{}: stopped at step {}{}", p_.owner, state_.step,
                        ck.enabled() ? fmt::format("; checkpoint in {}", ck.dir())
                                     : std::string());
}

Result<std::string> DrafterLoop::Finish(Channel<HiddenBatch>& channel) {
  // Done: the targets may still be pushing; closing the channel tells them (their Push
  // fails with Unavailable) and draining it releases the batches nobody will train on.
  channel.Close();
  while (channel.PopAs(p_.consumer, Duration::zero()).ok()) {
  }
  // The run may end between logs (the data ran out before max_steps): log its last step, so
  // the summary's loss is the last one trained, not NaN for "never read".
  if (state_.step > first_step_ && logged_step_ != state_.step) RETURN_IF_ERROR(LogMetrics());
  RETURN_IF_ERROR(p_.dev->Synchronize());
  RETURN_IF_ERROR(CheckFlags(/*wait=*/true));
  const int64_t t_end = NowNanos();
  const double secs = (t_end - t0_) * 1e-9;
  const double steady_secs = steady_t0_ > 0 ? (t_end - steady_t0_) * 1e-9 : 0.0;
  p_.set_stage("drafter.checkpoint");
  RETURN_IF_ERROR(p_.checkpointer->SaveAndFlush(state_, *p_.dev, *p_.trainer));
  std::string replicas_note;
  if (p_.allreduce != nullptr) {
    ASSIGN_OR_RETURN(uint64_t hash, WeightsHash());
    replicas_note = fmt::format(", replica {} of {}, weights fnv1a {:016x}",
                                p_.allreduce->rank(), p_.allreduce->size(), hash);
  }
  return fmt::format("steps {} (from {}), loss {:.4f} -> {:.4f}, {:.1f} tok/s, steady "
                     "{:.1f} tok/s over {:.1f} s, {} skipped non-finite, checksum "
                     "mismatches {}, restarts {}{}",
                     state_.step, first_step_, metrics_.first_loss(), metrics_.last_loss(),
                     run_tokens_ / std::max(secs, 1e-9),
                     steady_tokens_ / std::max(steady_secs, 1e-9), steady_secs, bad_total_,
                     mismatches_, p_.restarts, replicas_note) +
         CheckpointNote();
}

std::string DrafterLoop::CheckpointNote() const {
  std::string s;
  for (std::string part : {p_.checkpointer->Summary(),
                           p_.eval != nullptr ? p_.eval->Summary() : std::string()})
    if (!part.empty()) s += ", " + part;
  return s;
}

// FNV-1a over the bytes of the fp32 master weights (waits for the device).
Result<uint64_t> DrafterLoop::WeightsHash() {
  models::DFlashDrafter& d = p_.trainer->drafter();
  const kernels::TensorView m = d.params().master.view();
  std::vector<uint8_t> host(m.nbytes());
  RETURN_IF_ERROR(kernels::CopyToHost(host.data(), m, d.stream()));
  RETURN_IF_ERROR(kernels::SynchronizeStream(d.device(), d.stream()));
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : host) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

}  // namespace tandem::dflash
