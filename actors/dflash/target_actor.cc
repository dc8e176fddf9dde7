// TargetActor ("dflash.target"): per packed batch, the frozen target's forward with the
// captured layers written into one store object each, then a HiddenBatch pushed to `out`.
// On the CPU the forward writes straight into the store objects. On CUDA it writes into one
// of two device capture sets; a postprocess stream copies them into the objects (fenced) and
// a postprocess thread seals and pushes, so the next forward launches at once; the only host
// wait in the loop is backpressure (store space, the postprocess queue, the channel).
//
// Settings: out; model, target_config, seed, max_tokens, layers / num_context_layers
// (target_model.h); data: doc_len, batches_per_epoch, epochs, noise (synthetic_source.h).
// On `resume` of the job's dflash.drafter, seeks to the position its last checkpoint saved.
#include <fmt/format.h>

#include "actors/data/source.h"
#include "actors/dflash/checkpoint_resume.h"
#include "actors/dflash/hidden_batch.h"
#include "actors/dflash/synthetic_source.h"
#include "actors/dflash/target_model.h"
#include "actors/dflash/target_postprocess.h"
#include "runtime/actor/registry.h"
#include "runtime/job/job_actor.h"

namespace tandem::dflash {
namespace {

Result<std::unique_ptr<data::BatchSource>> MakeSource(const ConfigValue& s, const JobEnv& env,
                                                      const TargetModelSpec& spec, int replica,
                                                      int replicas) {
  SyntheticOptions o;
  o.vocab = spec.config.vocab_size;
  o.max_tokens = spec.max_tokens;
  o.seed = static_cast<uint64_t>(env.job->seed);
  ASSIGN_OR_RETURN(std::string kind, s.GetString("data", "synthetic"));
  // Files (JSONL or a binary set, docs/data-format.md) go through the data layer's packer.
  // The data layer checks every id against the vocab of the model it feeds (an id at or
  // above it has no embedding row and would train to a silent loss of 0).
  if (kind != "synthetic") {
    const data::SourceTarget feeds{
        spec.config.vocab_size,
        spec.model == "random" ? "vocab_size of the target's target_config"
                               : fmt::format("vocab_size of {}/config.json", spec.model)};
    return data::MakeBatchSource(s, replica, replicas, env.job->seed, feeds);
  }
  ASSIGN_OR_RETURN(o.doc_len, s.GetInt("doc_len", 64));
  ASSIGN_OR_RETURN(o.batches_per_epoch, s.GetInt("batches_per_epoch", 64));
  ASSIGN_OR_RETURN(o.epochs, s.GetInt("epochs", 1));
  ASSIGN_OR_RETURN(o.noise, s.GetDouble("noise", 0.05));
  if (o.doc_len < 8 || o.doc_len > o.max_tokens || o.batches_per_epoch < 1 || o.epochs < 1)
    return InvalidArgumentError("{}: need 8 <= doc_len <= max_tokens, batches_per_epoch >= 1, "
                                "epochs >= 1", s.location());
  return std::unique_ptr<data::BatchSource>(new SyntheticSource(o, replica, replicas));
}

// The data position a resumed drafter saved for this shard, if the job resumes.
Result<std::optional<data::DataPosition>> ResumePosition(const JobEnv& env, int replica) {
  for (const ActorGroupSpec& g : env.job->actors) {
    if (g.class_name != "dflash.drafter") continue;
    ASSIGN_OR_RETURN(ResumeMode resume, ParseResumeMode(g.settings));
    if (resume == ResumeMode::kOff) return std::optional<data::DataPosition>();
    ASSIGN_OR_RETURN(std::string dir, CheckpointDir(g.settings));
    // The same choice as the drafter's (checkpoint_resume.h), which also verifies it.
    ASSIGN_OR_RETURN(std::optional<ResumePoint> point, FindResumePoint(dir));
    if (!point) return std::optional<data::DataPosition>();
    auto it = point->state.positions.find(replica);
    if (it == point->state.positions.end()) return std::optional<data::DataPosition>();
    return std::optional<data::DataPosition>(it->second);
  }
  return std::optional<data::DataPosition>();
}

class TargetActor final : public JobActor {
 public:
  TargetActor(const ConfigValue& s, const ActorContext& ctx) : settings_(s) {}

  Result<std::string> Run(JobEnv* env) override {
    ASSIGN_OR_RETURN(std::string out, settings_.GetString("out", ""));
    if (out.empty()) return InvalidArgumentError("{}: dflash.target needs `out`", name());
    ASSIGN_OR_RETURN(TargetModelSpec spec, ParseTargetModelSpec(settings_, env->job->seed));
    const ActorGroupSpec* group = nullptr;
    for (const ActorGroupSpec& g : env->job->actors)
      if (g.name == context().group) group = &g;
    const int replicas = group != nullptr ? static_cast<int>(group->replicas) : 1;
    ASSIGN_OR_RETURN(auto source, MakeSource(settings_, *env, spec, context().replica, replicas));
    ASSIGN_OR_RETURN(auto pos, ResumePosition(*env, context().replica));
    if (pos) RETURN_IF_ERROR(source->Seek(*pos));
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<HiddenBatch>(out));
    const kernels::Device device = ActorDevice(context().gpu);
    ASSIGN_OR_RETURN(std::shared_ptr<SharedTarget> target, AcquireTarget(spec, device));
    if (!target->ClaimForward())
      return InvalidArgumentError("{}: another target actor already runs forwards of {} on "
                                  "this device; give each target replica its own GPU", name(),
                                  spec.model);
    struct Release {
      SharedTarget* t;
      ~Release() { t->ReleaseForward(); }
    } release{target.get()};
    ASSIGN_OR_RETURN(std::unique_ptr<TargetPipeline> pipe,
                     TargetPipeline::Create(target.get(), spec, env, channel.get(), name()));
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

TANDEM_REGISTER_ACTOR(TargetActor, "dflash.target");

}  // namespace tandem::dflash
