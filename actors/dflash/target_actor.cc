// TargetActor ("dflash.target"): per packed batch, the frozen target's forward with the
// captured layers written into one store object each, then a HiddenBatch pushed to `out`.
// On the CPU the forward writes straight into the store objects. On CUDA it writes into one
// of two device capture sets; a postprocess stream copies them into the objects (fenced) and
// a postprocess thread seals and pushes, so the next forward launches at once; the only host
// wait in the loop is backpressure (store space, the postprocess queue, the channel).
//
// Settings: out; model, target_config, seed, max_tokens, layers / num_context_layers
// (target_model.h); data: doc_len, batches_per_epoch, epochs, noise (synthetic_source.h).
// When the job resumes, seeks to the data position the job's registry holds for this
// replica (ResumePositions, published when the job was built from the resume point of the
// drafter group that trains against this group). The data layer checks every token id
// against the target's vocab_size (data::SourceTarget).
#include <fmt/format.h>

#include "actors/data/source.h"
#include "actors/dflash/checkpoint/resume_positions.h"
#include "actors/dflash/hidden_batch.h"
#include "actors/dflash/synthetic_source.h"
#include "actors/dflash/target_model.h"
#include "actors/dflash/target_pipeline.h"
#include "actors/dflash/target_settings.h"
#include "runtime/actor/registry.h"
#include "runtime/job/job_actor.h"
#include "runtime/job/job_spec_keys.h"

namespace tandem::dflash {
namespace {

Result<std::unique_ptr<data::BatchSource>> MakeSource(const ConfigValue& s,
                                                      const TargetSettings& t,
                                                      const JobEnv& env, int replica,
                                                      int replicas) {
  // Files (JSONL or a binary set, docs/data-format.md) go through the data layer's packer.
  // The data layer checks every id against the vocab of the model it feeds (an id at or
  // above it has no embedding row and would train to a silent loss of 0).
  if (t.data != "synthetic") {
    const TargetModelSpec& spec = t.model;
    const data::SourceTarget feeds{
        spec.config.vocab_size,
        spec.model == "random" ? "vocab_size of the target's target_config"
                               : fmt::format("vocab_size of {}/config.json", spec.model)};
    return data::MakeBatchSource(t.source_section, replica, replicas, env.job->seed, feeds);
  }
  return std::unique_ptr<data::BatchSource>(new SyntheticSource(t.synthetic, replica, replicas));
}

class TargetActor final : public JobActor {
 public:
  TargetActor(const ConfigValue& s, const ActorContext& ctx) : settings_(s) {}

  Result<std::string> Run(JobEnv* env) override {
    ASSIGN_OR_RETURN(TargetSettings ts, ParseTargetSettings(settings_, JobSectionContext(
                                                               *env->job, context().group)));
    const TargetModelSpec& spec = ts.model;
    const ActorGroupSpec* group = nullptr;
    for (const ActorGroupSpec& g : env->job->actors)
      if (g.name == context().group) group = &g;
    const int replicas = group != nullptr ? static_cast<int>(group->replicas) : 1;
    ASSIGN_OR_RETURN(auto source, MakeSource(settings_, ts, *env, context().replica, replicas));
    // Where a resumed job's drafter left this shard's data (resume_positions.h).
    if (std::optional<data::DataPosition> pos =
            env->registry->Get<ResumePositions>().For(context().group, context().replica))
      RETURN_IF_ERROR(source->Seek(*pos));
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<HiddenBatch>(ts.out));
    const kernels::Device device = ActorDevice(context().gpu);
    ASSIGN_OR_RETURN(std::shared_ptr<SharedTarget> target, AcquireTarget(*env->registry, spec, device));
    if (!target->ClaimForward())
      return InvalidArgumentError("{}: another target actor already runs forwards of {} on "
                                  "this device; give each target replica its own GPU", name(),
                                  spec.model);
    struct Release {
      SharedTarget* t;
      ~Release() { t->ReleaseForward(); }
    } release{target.get()};
    ASSIGN_OR_RETURN(std::unique_ptr<TargetPipeline> pipe,
                     TargetPipeline::Create(target.get(), spec, env, channel.get(),
                                            env->job->PortIndex("out", ts.out, context().group,
                                                                context().replica),
                                            name()));
    int64_t batches = 0, tokens = 0;
    bool consumers_done = false;
    while (true) {
      if (env->stopping() || stop_requested()) {
        RETURN_IF_ERROR(pipe->Finish());
        return CancelledError("{}: stopped", name());
      }
      ASSIGN_OR_RETURN(std::optional<data::TokenBatch> batch, source->Next());
      if (!batch) break;
      tokens += batch->tokens();
      ++batches;
      SetStage("target.forward");
      Status pushed = pipe->Submit(std::move(*batch), source->position(), context().replica);
      if (pushed.code() == StatusCode::kUnavailable) {
        consumers_done = true;  // the drafters closed the channel: they have all they need
        break;
      }
      RETURN_IF_ERROR(pushed);
    }
    if (!consumers_done) RETURN_IF_ERROR(pipe->Finish());
    return fmt::format("produced {} batches ({} tokens, layers [{}]){} from {}", batches, tokens,
                       fmt::join(spec.layer_ids, ", "),
                       consumers_done ? ", stopped when the drafters closed the channel" : "",
                       source->Describe());
  }

 private:
  ConfigValue settings_;
};

}  // namespace

TANDEM_REGISTER_ACTOR(TargetActor, "dflash.target", TargetKeys());

}  // namespace tandem::dflash
