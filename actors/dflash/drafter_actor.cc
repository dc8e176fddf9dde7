// DrafterActor ("dflash.drafter"): pops HiddenBatches (at least the channel's min_ready at a
// time), checks each batch's metadata checksum, runs one DFlashTrainer step per batch, reads
// loss / accuracy / grad stats only every `log_every` steps, checkpoints every
// `checkpoint.every_steps` and at the end, and continues from the latest checkpoint on
// `resume = true` or after a restart. Non-finite grads: the optimizer skips the step on the
// device; the actor counts it and aborts after `max_bad_steps` in a row.
//
// Settings: in; target (the dflash.target group whose model it trains against, default
// "target"); num_layers (2); max_steps (required); total_steps (LR schedule, default
// max_steps); lr; warmup_ratio; anchors_per_batch (64); noise_std; log_every (10);
// checkpoint = { dir, every_steps }; resume (true, false or "force": checkpoint_resume.h);
// max_bad_steps (5); fail_at_step (-1: never);
// metrics_file (the job's metrics file, docs/metrics.md; default CHECKPOINT_DIR/metrics.jsonl); layer_types (array of "full_attention" /
// "sliding_attention", default all full) and sliding_window; max_seconds (0: no limit; else
// stop after this many seconds counted from the end of the first step, the steady state,
// whose tokens/s the summary reports). CPU or one GPU per replica (drafter_device.h).
//
// replicas > 1: data parallel. Each replica pops its own batches from the shared channel;
// after backward the flat gradient buffer is averaged across the replicas
// (grad_allreduce.h: in-process on the CPU, NCCL on distinct GPUs), so all replicas apply
// the same update and keep bit-identical weights; the summary then ends with an FNV-1a
// hash of the fp32 master weights to show it. Replica 0 alone writes checkpoints (every
// replica resumes from them; the data positions saved are replica 0's). All replicas stop
// at max_steps; a replica that cannot (its channel closed early, an error) leaves the
// all-reduce, and every replica then fails with an error naming it, the job with them.
// max_seconds needs replicas = 1 (replicas must stop at the same step).
// Profile stages: drafter.queue_get, drafter.h2d (the upload), drafter.forward_backward,
// drafter.allreduce (replicas > 1), drafter.optim; on the GPU they time host-side enqueue.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "actors/dflash/checkpoint_resume.h"
#include "actors/dflash/checkpoint_state.h"
#include "actors/dflash/drafter_device.h"
#include "actors/dflash/grad_allreduce.h"
#include "actors/dflash/hidden_batch.h"
#include "actors/dflash/synthetic_source.h"
#include "actors/dflash/target_model.h"
#include "kernels/optim/adamw_types.h"
#include "kernels/core/memory.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/actor/registry.h"
#include "runtime/job/job_actor.h"
#include "runtime/core/clock.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {
namespace {

std::mutex g_mu;
std::set<std::string> g_started;  // run#name of drafters that started before (restarts)
std::set<std::string> g_failed;   // run#name that already threw at fail_at_step

bool Once(std::set<std::string>& set, const std::string& key) {
  std::lock_guard lock(g_mu);
  return set.insert(key).second;
}

class DrafterActor final : public JobActor {
 public:
  DrafterActor(const ConfigValue& s, const ActorContext& ctx) : s_(s) {}

  Result<std::string> Run(JobEnv* env) override {
    std::unique_ptr<GradientAllReduce> ar;
    Result<std::string> r = Train(env, ar);
    if (!r.ok() && ar != nullptr) ar->Leave(r.status().ToString());
    return r;
  }

 private:
  // FNV-1a over the bytes of the fp32 master weights (waits for the device).
  Result<uint64_t> WeightsHash(models::DFlashDrafter& d) {
    const kernels::TensorView m = d.params().master.view();
    std::vector<uint8_t> host(m.nbytes());
    RETURN_IF_ERROR(kernels::CopyToHost(host.data(), m, d.stream()));
    RETURN_IF_ERROR(kernels::SynchronizeStream(d.device(), d.stream()));
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint8_t b : host) h = (h ^ b) * 0x100000001b3ull;
    return h;
  }

  Result<std::string> Train(JobEnv* env, std::unique_ptr<GradientAllReduce>& ar) {
    const std::string key = fmt::format("{}#{}", env->run_id, name());
    const bool restarted = !Once(g_started, key);
    ASSIGN_OR_RETURN(std::string in, s_.GetString("in", ""));
    ASSIGN_OR_RETURN(std::string target_group, s_.GetString("target", "target"));
    ASSIGN_OR_RETURN(int64_t num_layers, s_.GetInt("num_layers", 2));
    ASSIGN_OR_RETURN(int64_t max_steps, s_.GetInt("max_steps", 0));
    ASSIGN_OR_RETURN(int64_t total_steps, s_.GetInt("total_steps", max_steps));
    ASSIGN_OR_RETURN(int64_t log_every, s_.GetInt("log_every", 10));
    ASSIGN_OR_RETURN(int64_t max_bad, s_.GetInt("max_bad_steps", 5));
    ASSIGN_OR_RETURN(int64_t fail_at, s_.GetInt("fail_at_step", -1));
    ASSIGN_OR_RETURN(ResumeMode resume, ParseResumeMode(s_));
    ASSIGN_OR_RETURN(std::string metrics_file, s_.GetString("metrics_file", ""));
    ASSIGN_OR_RETURN(double max_seconds, s_.GetDouble("max_seconds", 0.0));
    ASSIGN_OR_RETURN(int64_t sliding_window, s_.GetInt("sliding_window", 0));
    ASSIGN_OR_RETURN(std::string ck_dir, CheckpointDir(s_));
    int64_t ck_every = 0;
    if (const ConfigValue* ck = s_.Find("checkpoint"); ck != nullptr) {
      ASSIGN_OR_RETURN(ck_every, ck->GetInt("every_steps", 0));
    }
    if (in.empty()) return InvalidArgumentError("{}: dflash.drafter needs `in`", name());
    if (max_steps < 1 || total_steps < max_steps || log_every < 1)
      return InvalidArgumentError("{}: need max_steps >= 1, total_steps >= max_steps, "
                                  "log_every >= 1", name());
    const ActorGroupSpec* tg = nullptr;
    for (const ActorGroupSpec& g : env->job->actors)
      if (g.name == target_group) tg = &g;
    if (tg == nullptr || tg->class_name != "dflash.target")
      return InvalidArgumentError("{}: target = \"{}\" is not a dflash.target group", name(),
                                  target_group);
    int nranks = 1;
    for (const ActorGroupSpec& g : env->job->actors)
      if (g.name == context().group) nranks = static_cast<int>(g.replicas);
    if (nranks > 1 && max_seconds > 0)
      return InvalidArgumentError("{}: max_seconds needs replicas = 1 (data-parallel "
                                  "replicas must stop at the same step)", name());
    const bool writes_checkpoints = context().replica == 0;
    ASSIGN_OR_RETURN(TargetModelSpec spec, ParseTargetModelSpec(tg->settings, env->job->seed));
    const kernels::Device device = ActorDevice(context().gpu);
    ASSIGN_OR_RETURN(std::shared_ptr<SharedTarget> target, AcquireTarget(spec, device));
    if (nranks > 1) {
      ASSIGN_OR_RETURN(ar, JoinGradientAllReduce(env->run_id, context().group, nranks,
                                                 context().replica, device));
    }

    models::DFlashConfig dc;
    dc.layers = spec.config;
    dc.layers.architectures = {"DFlashDraftModel"};
    dc.layers.num_hidden_layers = num_layers;
    dc.layers.layer_types.assign(num_layers, models::LayerType::kFullAttention);
    dc.layers.sliding_window.reset();
    if (const ConfigValue* lt = s_.Find("layer_types"); lt != nullptr) {
      if (!lt->is_array() || static_cast<int64_t>(lt->array().size()) != num_layers)
        return InvalidArgumentError("{}: layer_types must list num_layers = {} entries", name(),
                                    num_layers);
      for (int64_t i = 0; i < num_layers; ++i) {
        ASSIGN_OR_RETURN(std::string t, lt->array()[i].AsString());
        if (t == "sliding_attention") {
          dc.layers.layer_types[i] = models::LayerType::kSlidingAttention;
        } else if (t != "full_attention") {
          return InvalidArgumentError("{}: layer_types[{}] = \"{}\" (full_attention or "
                                      "sliding_attention)", name(), i, t);
        }
      }
    }
    const bool any_sliding =
        std::count(dc.layers.layer_types.begin(), dc.layers.layer_types.end(),
                   models::LayerType::kSlidingAttention) > 0;
    if (any_sliding != (sliding_window > 0))
      return InvalidArgumentError("{}: sliding_window > 0 is needed exactly when some layer "
                                  "is sliding_attention", name());
    if (any_sliding) dc.layers.sliding_window = sliding_window;
    dc.layers.tie_word_embeddings = false;
    dc.layers.rotary_dim = dc.layers.head_dim;
    ASSIGN_OR_RETURN(int64_t mask_id, s_.GetInt("mask_token_id", spec.config.vocab_size - 1));
    dc.mask_token_id = mask_id;
    dc.num_target_layers = spec.config.num_hidden_layers;
    dc.target_layer_ids = spec.layer_ids;

    models::DFlashTrainOptions to;
    to.max_tokens = spec.max_tokens;
    to.total_steps = total_steps;
    ASSIGN_OR_RETURN(to.anchors_per_batch, s_.GetInt("anchors_per_batch", 64));
    ASSIGN_OR_RETURN(double lr, s_.GetDouble("lr", 6e-4));
    ASSIGN_OR_RETURN(to.warmup_ratio, s_.GetDouble("warmup_ratio", 0.04));
    ASSIGN_OR_RETURN(double noise, s_.GetDouble("noise_std", 0.05));
    ASSIGN_OR_RETURN(int64_t seed, s_.GetInt("seed", env->job->seed));
    to.lr = static_cast<float>(lr);
    to.noise_std = static_cast<float>(noise);
    to.seed = static_cast<uint64_t>(seed);
    ASSIGN_OR_RETURN(std::unique_ptr<DrafterDevice> dev,
                     DrafterDevice::Create(device, static_cast<int64_t>(spec.layer_ids.size()),
                                           spec.max_tokens, spec.config.hidden_size, env));
    ASSIGN_OR_RETURN(auto trainer, models::DFlashTrainer::Create(dc, to, device, dev->stream()));
    RETURN_IF_ERROR(trainer->drafter().params().InitFromScratch(to.seed, dev->stream()));

    // What this run is, saved with every checkpoint and compared on resume (issue 18).
    RunIdentity identity{to.seed, spec.model, spec.layer_ids, tg->replicas, spec.max_tokens, ""};
    ASSIGN_OR_RETURN(identity.data, tg->settings.GetString("data", "synthetic"));
    ResumeState state;
    state.identity = identity;
    ASSIGN_OR_RETURN(std::optional<ResumePoint> point,
                     OpenCheckpointDir(ck_dir, resume, restarted, writes_checkpoints, identity,
                                       dc, name()));
    int64_t committed_step = -1;  // the step directory this run last wrote or resumed from
    if (point) {
      models::DFlashTrainerState ts;
      RETURN_IF_ERROR(models::LoadDFlashCheckpoint(point->state.path, trainer->drafter(), &ts));
      if (ts.step != point->state.step)
        return DataLossError("{}: trainer_state.json says step {}, tandem_state.json step {}",
                             point->state.path, ts.step, point->state.step);
      trainer->Restore(ts);
      state = point->state;
      state.identity = identity;
      committed_step = state.step;
    }
    const int64_t first_step = state.step;
    if (first_step >= max_steps)
      return fmt::format("steps {} (already done at checkpoint), restarts {}", first_step,
                         restarted ? 1 : 0);

    // The job's metrics file (runtime/job/job_metrics.h): by default beside the checkpoints.
    if (metrics_file.empty() && !ck_dir.empty() && writes_checkpoints)
      metrics_file = ck_dir + "/metrics.jsonl";
    if (env->metrics != nullptr && !metrics_file.empty())
      RETURN_IF_ERROR(env->metrics->OpenFile(
          metrics_file, /*append=*/resume != ResumeMode::kOff || restarted));
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<HiddenBatch>(in));
    const ChannelSpec* cs = env->job->FindChannel(in);
    const size_t min_ready = cs != nullptr ? static_cast<size_t>(cs->min_ready) : 1;
    StageHandle get = env->profile->Stage("drafter.queue_get");
    StageHandle fb_stage = env->profile->Stage("drafter.forward_backward");
    StageHandle optim_stage = env->profile->Stage("drafter.optim");
    StageHandle h2d_stage = env->profile->Stage("drafter.h2d");
    std::optional<StageHandle> ar_stage;
    if (ar != nullptr) ar_stage = env->profile->Stage("drafter.allreduce");
    const models::DFlashTargetHead head{target->model().weights().embed(),
                                        target->model().weights().lm_head()};
    const int64_t rows = trainer->drafter().rows();
    const int64_t bs = dc.block_size;
    double first_loss = NAN, last_loss = NAN;
    int64_t bad_in_row = 0, bad_total = 0, mismatches = 0, run_tokens = 0;
    const int64_t t0 = NowNanos();
    int64_t steady_t0 = 0, steady_tokens = 0;  // from the end of the first step
    // Applies the finite/non-finite flags of finished steps (read back without a sync).
    auto check_flags = [&](bool wait) -> Status {
      ASSIGN_OR_RETURN(std::vector<StepFlags> flags, dev->Resolved(wait));
      for (const StepFlags& f : flags) {
        if (f.finite) {
          bad_in_row = 0;
          continue;
        }
        ++bad_total;
        if (++bad_in_row >= max_bad)
          return InternalError("{}: {} non-finite steps in a row, the last at step {} "
                               "(stages drafter.forward_backward / drafter.allreduce: loss or gradients NaN/Inf)", name(),
                               bad_in_row, f.step);
      }
      return Status::Ok();
    };
    auto checkpoint = [&]() -> Status {
      if (ck_dir.empty() || !writes_checkpoints) return Status::Ok();
      RETURN_IF_ERROR(dev->Synchronize());
      if (state.step == committed_step) return Status::Ok();  // already saved
      state.path = fmt::format("{}/{}", ck_dir, StepDirName(state.step));
      RETURN_IF_ERROR(CheckStepDirIsNew(state.path));
      RETURN_IF_ERROR(models::SaveDFlashCheckpoint(state.path, trainer->drafter(),
                                                   trainer->state()));
      RETURN_IF_ERROR(CommitState(ck_dir, state));
      committed_step = state.step;
      return Status::Ok();
    };
    // A stop request (Ctrl-C on `tandem run`, `tandem stop`) ends the run gracefully: the
    // steps done so far are checkpointed, so `resume = true` continues from here.
    int64_t last_saved_step = first_step;
    auto stopped = [&]() -> Status {
      if (state.step > last_saved_step) RETURN_IF_ERROR(checkpoint());
      return CancelledError("{}: stopped at step {}{}", name(), state.step,
                            ck_dir.empty() || !writes_checkpoints
                                ? std::string()
                                : fmt::format("; checkpoint in {}", ck_dir));
    };
    if (env->metrics != nullptr) env->metrics->SetStep(name(), state.step, max_steps);
    bool done = false;
    while (!done) {
      SetStage("drafter.queue_get");
      ScopedTimer wait(get);
      Result<std::vector<HiddenBatch>> popped =
          channel->PopBatch(min_ready, std::max<size_t>(min_ready, 1) * 4,
                            std::chrono::milliseconds(200));
      wait.Stop();
      if (!popped.ok()) {
        if (popped.status().code() == StatusCode::kDeadlineExceeded) {
          if (env->stopping() || stop_requested()) return stopped();
          continue;
        }
        break;  // closed and drained
      }
      for (HiddenBatch& hb : *popped) {
        if (done) break;  // leftovers are dropped; their refs go with them
        if (MetadataChecksum(hb.tokens) != hb.checksum) {
          ++mismatches;
          return DataLossError("{}: batch {} from target/{} fails its metadata checksum",
                               name(), hb.tokens.index, hb.source_replica);
        }
        if (hb.layer_ids != spec.layer_ids)
          return InvalidArgumentError("{}: batch carries layers [{}], expected [{}]", name(),
                                      fmt::join(hb.layer_ids, ","),
                                      fmt::join(spec.layer_ids, ","));
        const int64_t t = hb.tokens.tokens();
        SetStage("drafter.h2d");
        ScopedTimer h2d_timer(h2d_stage);
        ASSIGN_OR_RETURN(std::vector<kernels::TensorView> ctx, dev->Upload(hb));
        h2d_timer.Stop();
        {
          SetStage("drafter.forward_backward");
          ScopedTimer timer(fb_stage);
          const auto& b = hb.tokens;
          models::PackedBatchMeta meta{b.input_ids, b.position_ids, b.cu_seqlens, b.loss_mask};
          RETURN_IF_ERROR(trainer->ForwardBackward(head, meta, ctx));
        }
        if (ar != nullptr) {
          SetStage("drafter.allreduce");
          ScopedTimer timer(*ar_stage);
          RETURN_IF_ERROR(ar->AllReduceAvg(trainer->drafter().params().grads.view(),
                                           dev->stream()));
        }
        {
          SetStage("drafter.optim");
          ScopedTimer timer(optim_stage);
          RETURN_IF_ERROR(trainer->OptimizerStep());
        }
        if (fail_at >= 0 && state.step + 1 == fail_at && Once(g_failed, key))
          throw std::runtime_error(fmt::format("fail_at_step={} reached (deliberate)", fail_at));
        ++state.step;
        state.tokens += t;
        run_tokens += t;
        state.positions[hb.source_replica] = hb.next_position;
        RETURN_IF_ERROR(dev->AfterStep(state.step, trainer->drafter()));
        if (env->metrics != nullptr) env->metrics->SetStep(name(), state.step, max_steps);
        RETURN_IF_ERROR(check_flags(/*wait=*/false));
        if (steady_t0 == 0) {
          RETURN_IF_ERROR(dev->Synchronize());  // once: the first step includes warm-up
          steady_t0 = NowNanos();
        } else {
          steady_tokens += t;
        }
        if (max_seconds > 0 && (NowNanos() - steady_t0) * 1e-9 >= max_seconds) done = true;
        if (state.step % log_every == 0 || state.step == max_steps || done) {
          ASSIGN_OR_RETURN(StepMetrics m, dev->ReadMetrics(trainer->drafter()));
          RETURN_IF_ERROR(check_flags(/*wait=*/true));
          const float* gs = m.grad_stats;
          const double loss = m.loss;
          if (std::isnan(first_loss)) first_loss = loss;
          last_loss = loss;
          // tau = 1 + sum over block slots j >= 1 of the fraction of blocks whose first j
          // predictions are all correct (acceptance length estimate).
          const uint8_t* c = m.correct.data();
          const int64_t nb = rows / bs;
          double tau = 1.0, acc = 0.0;
          std::vector<int> alive(nb, 1);
          for (int64_t j = 1; j < bs; ++j) {
            int64_t ok = 0, hit = 0;
            for (int64_t blk = 0; blk < nb; ++blk) {
              alive[blk] &= c[blk * bs + j];
              ok += alive[blk];
              hit += c[blk * bs + j];
            }
            tau += static_cast<double>(ok) / nb;
            acc += static_cast<double>(hit) / nb / (bs - 1);
          }
          const double secs = (NowNanos() - t0) * 1e-9;
          const std::string line = fmt::format(
              R"({{"step": {}, "loss": {:.6f}, "acc": {:.4f}, "tau": {:.3f}, "grad_norm": {:.4f}, "lr": {:.3e}, "tok_s": {:.1f}}})",
              state.step, loss, acc, tau, gs[kernels::kGradStatsNorm],
              trainer->LearningRate(state.step - 1), run_tokens / std::max(secs, 1e-9));
          TLOG_INFO("{}: {}", name(), line);
          if (env->metrics != nullptr)
            env->metrics->Record(name(), {state.step, max_steps, loss, acc, tau,
                                          gs[kernels::kGradStatsNorm],
                                          trainer->LearningRate(state.step - 1),
                                          run_tokens / std::max(secs, 1e-9)});
        }
        if (ck_every > 0 && state.step % ck_every == 0) {
          RETURN_IF_ERROR(checkpoint());
          last_saved_step = state.step;
        }
        if (state.step >= max_steps) done = true;
        if (env->stopping() || stop_requested()) return stopped();
      }
    }
    if (ar != nullptr && state.step < max_steps)
      return UnavailableError("{}: its input channel closed at step {}, before max_steps = {}; "
                              "the other data-parallel replicas cannot go on without it",
                              name(), state.step, max_steps);
    // Done: the targets may still be pushing; closing the channel tells them (their Push
    // fails with Unavailable) and draining it releases the batches nobody will train on.
    channel->Close();
    while (channel->TryPop().ok()) {
    }
    RETURN_IF_ERROR(dev->Synchronize());
    RETURN_IF_ERROR(check_flags(/*wait=*/true));
    const int64_t t_end = NowNanos();
    const double secs = (t_end - t0) * 1e-9;
    const double steady_secs = steady_t0 > 0 ? (t_end - steady_t0) * 1e-9 : 0.0;
    RETURN_IF_ERROR(checkpoint());
    std::string replicas_note;
    if (ar != nullptr) {
      ASSIGN_OR_RETURN(uint64_t hash, WeightsHash(trainer->drafter()));
      replicas_note = fmt::format(", replica {} of {}, weights fnv1a {:016x}", ar->rank(),
                                  ar->size(), hash);
    }
    return fmt::format("steps {} (from {}), loss {:.4f} -> {:.4f}, {:.1f} tok/s, steady "
                       "{:.1f} tok/s over {:.1f} s, {} skipped non-finite, checksum "
                       "mismatches {}, restarts {}{}",
                       state.step, first_step, first_loss, last_loss,
                       run_tokens / std::max(secs, 1e-9),
                       steady_tokens / std::max(steady_secs, 1e-9), steady_secs, bad_total,
                       mismatches, restarted ? 1 : 0, replicas_note);
  }

  ConfigValue s_;
};

}  // namespace

TANDEM_REGISTER_ACTOR(DrafterActor, "dflash.drafter");

}  // namespace tandem::dflash
