// DrafterActor ("dflash.drafter"): pops HiddenBatches (at least the channel's min_ready at a
// time), checks each batch's metadata checksum, runs one DFlashTrainer step per batch, reads
// loss / accuracy / grad stats only every `log_every` steps, checkpoints every
// `checkpoint.every_steps` and at the end, and continues from the latest checkpoint on
// `resume = true` or after a restart. Non-finite grads: the optimizer skips the step on the
// device; the actor counts it and aborts after `max_bad_steps` in a row.
//
// Settings: in; target (the dflash.target group whose model it trains against, default
// "target"); num_layers (2); max_steps (required); total_steps (LR schedule, default
// max_steps); lr; warmup_ratio; anchors_per_batch (64) and anchors_per_sequence (0: none);
// loss_decay (by block size); is_causal (absent: per layer); init_from (a drafter checkpoint
// to start from instead of random weights; a resumed run loads its own checkpoint instead);
// noise_std; log_every (10);
// checkpoint = { dir, every_steps, async (the snapshot takes pinned_bytes, by default sized
// from the drafter), keep_last };
// eval = { every_steps, prompts, ... } (tau by speculative decoding every N steps on replica
// 0, profile stage drafter.eval, the best checkpoint kept: drafter_eval.h);
// resume (true, false or "force": checkpoint_resume.h);
// max_bad_steps (5);
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
// replica resumes from them; the data positions saved cover every replica's batches, on
// one node or several: dp_positions.h, dp_positions_nodes.h). All replicas stop
// at max_steps; a replica that cannot (its channel closed early, an error) leaves the
// all-reduce, and every replica then fails with an error naming it, the job with them.
// Each replica pops as consumer JobSpec::PortIndex("in", ...): with the channel's
// route = "replica" its sequence of batches is fixed, so a run repeats bit for bit.
// max_seconds needs replicas = 1 (replicas must stop at the same step).
// Profile stages: drafter.queue_get, drafter.h2d (the upload), drafter.forward_backward,
// drafter.allreduce (replicas > 1), drafter.optim; on the GPU they time host-side enqueue,
// and drafter.gpu.step times each step on the GPU (events). optimizer_overlap = true runs
// AdamW on a second stream overlapping the next forward (DFlashDrafter::OptimizerStep).
// drafter.checkpoint.{snapshot,write,wait} (drafter_checkpointer.h).
//
// This file builds the parts of a run (settings: drafter_settings.h; the target's
// embedding and LM head: a colocated target replica's, else the two matrices alone,
// never a whole target of its own unless the eval's decoder needs one; the trainer; the
// device; the all-reduce; checkpoints: drafter_checkpointer.h) and hands them to the loop
// (drafter_loop.h).
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "actors/dflash/checkpoint/checkpoint_cleanup.h"
#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/checkpoint/drafter_checkpointer.h"
#include "actors/dflash/checkpoint/resume_positions.h"
#include "actors/dflash/drafter_device.h"
#include "actors/dflash/drafter_eval.h"
#include "actors/dflash/drafter_faults.h"
#include "actors/dflash/drafter_loop.h"
#include "actors/dflash/drafter_settings.h"
#include "actors/dflash/grad_allreduce.h"
#include "actors/dflash/target_model.h"
#include "actors/dflash/target_settings.h"
#include "kernels/loss/lm_head_ce_fp8.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/actor/registry.h"
#include "runtime/actor/system.h"
#include "runtime/cluster/node_link.h"
#include "runtime/core/logging.h"
#include "runtime/job/job_actor.h"
#include "runtime/job/job_prepare.h"
#include "runtime/job/job_spec_keys.h"

namespace tandem::dflash {
namespace {

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
  // The dflash.target group this drafter trains against, and its replica count.
  Result<TargetModelSpec> TargetOf(const JobEnv& env, const DrafterSettings& ds, int* nranks) {
    const ActorGroupSpec* tg = nullptr;
    for (const ActorGroupSpec& g : env.job->actors)
      if (g.name == ds.target_group) tg = &g;
    if (tg == nullptr || tg->class_name != "dflash.target")
      return InvalidArgumentError("{}: target = \"{}\" is not a dflash.target group", name(),
                                  ds.target_group);
    *nranks = 1;
    for (const ActorGroupSpec& g : env.job->actors)
      if (g.name == context().group) *nranks = static_cast<int>(g.replicas);
    if (*nranks > 1 && ds.max_seconds > 0)
      return InvalidArgumentError("{}: max_seconds needs replicas = 1 (data-parallel "
                                  "replicas must stop at the same step)", name());
    return ParseTargetModelSpec(tg->settings, env.job->seed);
  }

  // What a checkpoint of this run records and a resumed run must match (checkpoint_state.h).
  Result<RunIdentity> IdentityOf(const JobEnv& env, const DrafterSettings& ds,
                                 const TargetModelSpec& spec) const {
    RunIdentity id{ds.seed, spec.model, spec.layer_ids, 1, spec.max_tokens, "synthetic"};
    for (const ActorGroupSpec& g : env.job->actors) {
      if (g.name != ds.target_group) continue;
      id.target_replicas = g.replicas;
      ASSIGN_OR_RETURN(id.data, g.settings.GetString("data", "synthetic"));
    }
    return id;
  }

  // True on the CPU, and on a GPU where a replica of `target_group` runs.
  bool SharesDeviceWithTarget(const std::string& target_group, kernels::Device device) const {
    if (device.is_cpu() || context().system == nullptr) return true;
    for (const ActorInfo& a : context().system->Snapshot())
      if (a.name.rfind(target_group + "/", 0) == 0 && a.gpu == device.index) return true;
    return false;
  }

  // The number of producers of channel `channel` (the writers the saved positions are keyed
  // by, hidden_batch.h).
  static int ChannelWriters(const JobSpec& job, const std::string& channel) {
    int writers = 0;
    for (const ActorGroupSpec& g : job.actors)
      if (job.PortIndex("out", channel, g.name, 0) >= 0) writers += static_cast<int>(g.replicas);
    return writers;
  }

  Result<std::string> Train(JobEnv* env, std::unique_ptr<GradientAllReduce>& ar) {
    const int restarts = context().restarts;
    ASSIGN_OR_RETURN(const DrafterSettings ds, ParseDrafterSettings(
                                            s_, JobSectionContext(*env->job, context().group)));
    int nranks = 1;
    ASSIGN_OR_RETURN(const TargetModelSpec spec, TargetOf(*env, ds, &nranks));
    const kernels::Device device = ActorDevice(context().gpu);
    std::unique_ptr<DataPositionsAcrossNodes> dp_nodes;  // replicas on several nodes
    if (nranks > 1) {
      if (const ChannelSpec* in = env->job->FindChannel(ds.in);
          in != nullptr && in->route != "replica" && context().replica == 0)
        TLOG_WARN("{}: channel '{}' has route = \"{}\": which replica trains on which batch "
                  "is a race, so runs do not repeat; route = \"replica\" fixes it", name(),
                  ds.in, in->route);
      // A job on several nodes (runtime/cluster): the group's replicas meet across processes.
      const cluster::NodeLink& link = env->registry->Get<cluster::NodeLink>();
      if (link.node != nullptr) {
        const Duration timeout = std::chrono::duration_cast<Duration>(
            std::chrono::duration<double>(link.collective_timeout_s));
        ASSIGN_OR_RETURN(ar, JoinGradientAllReduceAcrossNodes(*link.node, context().group,
                                                              nranks, context().replica,
                                                              device, link.address, timeout));
        ASSIGN_OR_RETURN(dp_nodes, DataPositionsAcrossNodes::Join(
                                       *link.node, context().group, nranks, context().replica,
                                       ChannelWriters(*env->job, ds.in), link.address, timeout));
      } else {
        ASSIGN_OR_RETURN(ar, JoinGradientAllReduce(*env->registry, context().group, nranks,
                                                   context().replica, device));
      }
    }
    const models::DFlashTrainOptions to = DrafterTrainOptions(ds, spec);
    ASSIGN_OR_RETURN(kernels::Allocator * alloc, JobAllocator(*env->registry, device));
    ASSIGN_OR_RETURN(std::unique_ptr<DrafterDevice> dev,
                     DrafterDevice::Create(*alloc, static_cast<int64_t>(spec.layer_ids.size()),
                                           spec.max_tokens, spec.config.hidden_size, env));
    ASSIGN_OR_RETURN(auto trainer, models::DFlashTrainer::Create(DrafterConfig(ds, spec), to,
                                                                 *alloc, dev->stream()));
    RETURN_IF_ERROR(trainer->drafter().params().InitFromScratch(to.seed, dev->stream()));
    // The frozen embedding and LM head: a target replica's on this device (colocation), else
    // the two matrices alone.
    std::shared_ptr<SharedTarget> target;
    std::optional<TargetHead> own_head;
    models::DFlashTargetHead head;
    if (SharesDeviceWithTarget(ds.target_group, device) || ds.eval.enabled) {  // eval decodes
      ASSIGN_OR_RETURN(target, AcquireTarget(*env->registry, spec, device));
      head = {target->embed(), target->lm_head()};
    } else {
      ASSIGN_OR_RETURN(own_head, LoadTargetHead(spec, *alloc, dev->stream()));
      head = {own_head->embed(), own_head->lm_head()};
    }
    // lm_head_precision = "fp8": the head quantized once; it never changes.
    std::optional<kernels::Fp8LmHeadWeights> fp8_head;
    if (ds.lm_head_fp8) {
      ASSIGN_OR_RETURN(fp8_head, kernels::Fp8LmHeadWeights::Quantize(head.lm_head, *alloc,
                                                                     dev->stream()));
      head.lm_head_fp8 = &fp8_head->head();
    }

    CheckpointerOptions co;
    co.dir = ds.checkpoint_dir;
    co.writer = context().replica == 0;
    co.owner = name();
    co.async = ds.checkpoint_async;
    co.keep_last = ds.checkpoint_keep_last;
    // What the job's resource check counted for this group (DrafterKeys' pinned default).
    co.pinned_budget = DefaultDrafterPinnedBytes(ds);
    if (s_.Find("pinned_bytes") != nullptr) {
      ASSIGN_OR_RETURN(const int64_t pinned, s_.GetInt("pinned_bytes", 0));
      co.pinned_budget = static_cast<uint64_t>(pinned);
    }
    // Faults a test installed in the job's registry (drafter_faults.h); none otherwise.
    const DrafterFaults::Plan faults = env->registry->Get<DrafterFaults>().Get();
    co.test_hold_write = faults.hold_checkpoint_write;
    co.test_hold_removal = faults.hold_checkpoint_removal;
    co.test_stall_at = faults.stall_checkpoint_write_at_step;
    DrafterCheckpointer checkpointer(std::move(co), env->profile);
    if (checkpointer.enabled() && restarts == 0)
      RETURN_IF_ERROR(CleanCheckpointDir(ds.checkpoint_dir).status());
    // What this run is, saved with every checkpoint and compared on resume.
    ASSIGN_OR_RETURN(const RunIdentity identity, IdentityOf(*env, ds, spec));
    ASSIGN_OR_RETURN(ResumeState state,
                     checkpointer.Open(*trainer, ds.resume, restarts > 0, identity,
                                       DrafterConfig(ds, spec)));
    // Warm start, unless the run resumed (its own checkpoint wins): the weights of a
    // released or exported drafter, whose config ParseDrafterSettings already matched.
    if (!ds.init_from.empty() && state.path.empty()) {
      RETURN_IF_ERROR(models::LoadDFlashWeights(ds.init_from, trainer->drafter())
                          .WithContext(name() + ": init_from"));
      TLOG_INFO("{}: initialized from {}", name(), ds.init_from);
    }
    if (state.step >= ds.max_steps)
      return fmt::format("steps {} (already done at checkpoint), restarts {}", state.step,
                         restarts);
    // The job's metrics file (runtime/job/job_metrics.h): by default beside the checkpoints.
    std::string metrics_file = ds.metrics_file;
    if (metrics_file.empty() && checkpointer.enabled())
      metrics_file = ds.checkpoint_dir + "/metrics.jsonl";
    if (env->metrics != nullptr && !metrics_file.empty())
      RETURN_IF_ERROR(env->metrics->OpenFile(
          metrics_file, /*append=*/ds.resume != ResumeMode::kOff || restarts > 0));
    std::unique_ptr<DrafterEval> eval;  // the `eval` table: replica 0 decodes (drafter_eval.h)
    if (ds.eval.enabled && context().replica == 0) {
      ASSIGN_OR_RETURN(eval, DrafterEval::Create(ds.eval, target, trainer->drafter(),
                                                 env->metrics, env->profile, name(), to.seed));
      RETURN_IF_ERROR(eval->ResumeBest(ds.checkpoint_dir, state.step));
    }
    DrafterParts parts;
    parts.settings = &ds;
    parts.env = env;
    parts.owner = name();
    parts.restarts = restarts;
    parts.consumer = env->job->PortIndex("in", ds.in, context().group, context().replica);
    parts.fail_at_step = faults.fail_at_step;
    parts.layer_ids = spec.layer_ids;
    parts.head = head;
    parts.trainer = trainer.get();
    parts.dev = dev.get();
    parts.allreduce = ar.get();
    parts.dp_nodes = dp_nodes.get();
    if (ar != nullptr && dp_nodes == nullptr) {
      parts.dp_positions = &DataParallelPositions::ForGroup(*env->registry, context().group);
      for (int r = 0; r < ar->size(); ++r) parts.board_ranks.push_back(r);
    }
    parts.checkpointer = &checkpointer;
    parts.eval = eval.get();
    parts.set_stage = [this](std::string stage) { SetStage(std::move(stage)); };
    parts.stop_requested = [this] { return stop_requested(); };
    DrafterLoop loop(std::move(parts), std::move(state));
    return loop.Run();
  }

  ConfigValue s_;
};

}  // namespace

TANDEM_REGISTER_ACTOR(DrafterActor, "dflash.drafter", DrafterKeys());
// The targets' data positions of a resumed job (resume_positions.h).
TANDEM_REGISTER_JOB_PREPARE("dflash.drafter", PublishResumePositions);

}  // namespace tandem::dflash
