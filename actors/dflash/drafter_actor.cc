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
// checkpoint = { dir, every_steps }; resume; max_bad_steps (5); fail_at_step (-1: never);
// metrics_file (JSON lines, one per log). CPU only for now; replicas must be 1.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "actors/dflash/checkpoint_state.h"
#include "actors/dflash/hidden_batch.h"
#include "actors/dflash/synthetic_source.h"
#include "actors/dflash/target_model.h"
#include "kernels/adamw_types.h"
#include "models/dflash_checkpoint.h"
#include "models/dflash_trainer.h"
#include "runtime/actor/registry.h"
#include "runtime/control/job_actor.h"
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
    ASSIGN_OR_RETURN(bool resume, s_.GetBool("resume", false));
    ASSIGN_OR_RETURN(std::string metrics_file, s_.GetString("metrics_file", ""));
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
    for (const ActorGroupSpec& g : env->job->actors)
      if (g.name == context().group && g.replicas > 1)
        return InvalidArgumentError("{}: several drafter replicas need the NCCL gradient "
                                    "all-reduce, which is not wired in yet; use replicas = 1",
                                    name());
    ASSIGN_OR_RETURN(TargetModelSpec spec, ParseTargetModelSpec(tg->settings, env->job->seed));
    const kernels::Device device = ActorDevice(context().gpu);
    if (!device.is_cpu())
      return InvalidArgumentError("{}: dflash.drafter on a GPU is not supported yet; run the "
                                  "job with gpus = 0", name());
    ASSIGN_OR_RETURN(std::shared_ptr<SharedTarget> target, AcquireTarget(spec, device));

    models::DFlashConfig dc;
    dc.layers = spec.config;
    dc.layers.architectures = {"DFlashDraftModel"};
    dc.layers.num_hidden_layers = num_layers;
    dc.layers.layer_types.assign(num_layers, models::LayerType::kFullAttention);
    dc.layers.sliding_window.reset();
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
    ASSIGN_OR_RETURN(auto trainer, models::DFlashTrainer::Create(dc, to, device, nullptr));
    RETURN_IF_ERROR(trainer->drafter().params().InitFromScratch(to.seed, nullptr));

    ResumeState state;
    if (resume || restarted) {
      ASSIGN_OR_RETURN(std::optional<ResumeState> latest, ReadLatestState(ck_dir));
      if (latest) {
        models::DFlashTrainerState ts;
        RETURN_IF_ERROR(models::LoadDFlashCheckpoint(latest->path, trainer->drafter(), &ts));
        trainer->Restore(ts);
        state = *latest;
        TLOG_INFO("{}: resumed from {} at step {}", name(), latest->path, state.step);
      }
    }
    const int64_t first_step = state.step;
    if (first_step >= max_steps)
      return fmt::format("steps {} (already done at checkpoint), restarts {}", first_step,
                         restarted ? 1 : 0);

    std::ofstream metrics;
    if (!metrics_file.empty()) metrics.open(metrics_file, std::ios::app);
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<HiddenBatch>(in));
    const ChannelSpec* cs = env->job->FindChannel(in);
    const size_t min_ready = cs != nullptr ? static_cast<size_t>(cs->min_ready) : 1;
    StageHandle get = env->profile->Stage("drafter.queue_get");
    StageHandle h2d = env->profile->Stage("drafter.h2d");
    StageHandle step_stage = env->profile->Stage("drafter.step");
    const models::DFlashTargetHead head{target->model().weights().embed(),
                                        target->model().weights().lm_head()};
    const int64_t rows = trainer->drafter().rows();
    const int64_t bs = dc.block_size;
    double first_loss = NAN, last_loss = NAN;
    int64_t bad_in_row = 0, bad_total = 0, mismatches = 0, run_tokens = 0;
    const int64_t t0 = NowNanos();
    auto checkpoint = [&]() -> Status {
      if (ck_dir.empty()) return Status::Ok();
      state.path = fmt::format("{}/step_{:08d}", ck_dir, state.step);
      RETURN_IF_ERROR(models::SaveDFlashCheckpoint(state.path, trainer->drafter(),
                                                   trainer->state()));
      return CommitState(ck_dir, state);
    };
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
          if (env->stopping() || stop_requested()) return CancelledError("{}: stopped", name());
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
        std::vector<kernels::TensorView> ctx;
        {
          ScopedTimer timer(h2d);  // CPU: views of the host objects, nothing to copy
          for (const ObjectRef& r : hb.layers)
            ctx.emplace_back(const_cast<uint8_t*>(r.data()), kernels::DType::kBF16,
                             kernels::Shape({t, hb.hidden_size}));
        }
        SetStage("drafter.step");
        {
          ScopedTimer timer(step_stage);
          const auto& b = hb.tokens;
          models::PackedBatchMeta meta{b.input_ids, b.position_ids, b.cu_seqlens, b.loss_mask};
          RETURN_IF_ERROR(trainer->Step(head, meta, ctx));
        }
        if (fail_at >= 0 && state.step + 1 == fail_at && Once(g_failed, key))
          throw std::runtime_error(fmt::format("fail_at_step={} reached (deliberate)", fail_at));
        const float* gs = trainer->drafter().grad_stats().data_as<float>();
        if (!std::isfinite(*trainer->drafter().loss().data_as<float>()) ||
            gs[kernels::kGradStatsNonFinite] != 0.f) {
          ++bad_total;
          if (++bad_in_row >= max_bad)
            return InternalError("{}: {} non-finite steps in a row, the last at step {} "
                                 "(stage drafter.step: loss or gradients NaN/Inf)", name(),
                                 bad_in_row, state.step);
        } else {
          bad_in_row = 0;
        }
        ++state.step;
        state.tokens += t;
        run_tokens += t;
        state.positions[hb.source_replica] = hb.next_position;
        if (state.step % log_every == 0 || state.step == max_steps) {
          const double loss = *trainer->drafter().loss().data_as<float>();
          if (std::isnan(first_loss)) first_loss = loss;
          last_loss = loss;
          // tau = 1 + sum over block slots j >= 1 of the fraction of blocks whose first j
          // predictions are all correct (acceptance length estimate).
          const uint8_t* c = trainer->drafter().correct().data_as<uint8_t>();
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
          if (metrics.is_open()) metrics << line << "\n" << std::flush;
        }
        if (ck_every > 0 && state.step % ck_every == 0) RETURN_IF_ERROR(checkpoint());
        if (state.step >= max_steps) done = true;
        if (env->stopping() || stop_requested()) return CancelledError("{}: stopped", name());
      }
    }
    // Done: the targets may still be pushing; closing the channel tells them (their Push
    // fails with Unavailable) and draining it releases the batches nobody will train on.
    channel->Close();
    while (channel->TryPop().ok()) {
    }
    RETURN_IF_ERROR(checkpoint());
    const double secs = (NowNanos() - t0) * 1e-9;
    return fmt::format("steps {} (from {}), loss {:.4f} -> {:.4f}, {:.1f} tok/s, {} skipped "
                       "non-finite, checksum mismatches {}, restarts {}",
                       state.step, first_step, first_loss, last_loss,
                       run_tokens / std::max(secs, 1e-9), bad_total, mismatches,
                       restarted ? 1 : 0);
  }

 private:
  ConfigValue s_;
};

}  // namespace

TANDEM_REGISTER_ACTOR(DrafterActor, "dflash.drafter");

}  // namespace tandem::dflash
