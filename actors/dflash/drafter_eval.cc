#include "actors/dflash/drafter_eval.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "runtime/core/clock.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {
namespace {

// The decoder's buffers of its own besides the two workspaces (dflash_decoder.cc): the KV
// cache of the target's attention layers (a hybrid's Gated DeltaNet state, ~0.15 GiB for
// the 27B, is not counted), the captured features and the logits.
struct DecoderBuffers {
  int64_t kv = 0, features = 0, logits = 0;
  int64_t total() const { return kv + features + logits; }
};

struct DecoderShape {
  int64_t attention_layers = 0, kv_dim = 0, hidden = 0, vocab = 0;
};

DecoderShape ShapeOf(const models::TransformerConfig& c) {
  return {c.num_hidden_layers, c.num_key_value_heads * c.head_dim, c.hidden_size,
          c.vocab_size};
}

DecoderShape ShapeOf(const models::Qwen35Config& c) {
  int64_t attention_layers = 0;
  for (models::HybridLayerType t : c.layer_types)
    attention_layers += t == models::HybridLayerType::kFullAttention;
  return {attention_layers, c.num_key_value_heads * c.head_dim, c.hidden_size, c.vocab_size};
}

DecoderBuffers DecoderBufferBytes(const DecoderShape& d, int64_t captured, int64_t max_context,
                                  int64_t block_size) {
  return {2 * d.attention_layers * max_context * d.kv_dim * 2,
          captured * max_context * d.hidden * 2, block_size * d.vocab * 4};
}

// The tokens a decode holds for prompts of up to `longest` tokens, and the largest forward
// the decoding target runs (a prompt's prefill or one block): Allocate's and the bound's.
int64_t DecodeContext(int64_t longest, int64_t max_new_tokens, int64_t block_size) {
  return longest + max_new_tokens + block_size;
}
int64_t DecodeForwardTokens(int64_t longest, int64_t block_size) {
  return std::max(longest, block_size);
}

// The decoding target's workspace for prompts of up to `longest` tokens (Allocate's).
int64_t DecoderTargetWorkspace(const TargetModelSpec& target, int64_t longest,
                               int64_t block_size) {
  const int64_t max_tokens = DecodeForwardTokens(longest, block_size);
  return target.hybrid ? models::Qwen35Target::WorkspaceBytes(*target.hybrid, max_tokens,
                                                              /*on_cuda=*/true, target.precision)
                       : models::Qwen3Target::WorkspaceBytes(target.config, max_tokens,
                                                             target.precision);
}

}  // namespace

Result<int64_t> DrafterEval::DeviceBytesBound(const EvalSettings& settings,
                                              const TargetModelSpec& target,
                                              const models::DFlashConfig& drafter) {
  const int64_t bs = drafter.block_size, longest = settings.max_prompt_tokens;
  const int64_t max_context = DecodeContext(longest, settings.max_new_tokens, bs);
  models::DFlashDrafterOptions dopt;
  dopt.max_tokens = max_context;
  dopt.num_blocks = models::kDrafterBlocksCuda;
  ASSIGN_OR_RETURN(const int64_t drafter_ws,
                   models::DFlashDrafter::WorkspaceBytes(drafter, dopt,
                                                         kernels::Device::Cuda(0)));
  const int64_t captured = static_cast<int64_t>(drafter.target_layer_ids.size());
  const DecoderShape shape = target.hybrid ? ShapeOf(*target.hybrid) : ShapeOf(target.config);
  // A DFlash2 drafter's proposer (its LM-head rows, candidates and selector projection).
  const int64_t proposer = models::DFlash2Proposer::WorkspaceBytes(drafter, bs);
  return DecoderBufferBytes(shape, captured, max_context, bs).total() +
         DecoderTargetWorkspace(target, longest, bs) + drafter_ws + proposer;
}

Result<std::unique_ptr<DrafterEval>> DrafterEval::Create(const EvalSettings& settings,
                                                         std::shared_ptr<SharedTarget> target,
                                                         models::DFlashDrafter& trained,
                                                         JobMetrics* metrics,
                                                         ProfileStats* profile,
                                                         std::string owner, uint64_t seed) {
  if (target == nullptr || (target->dense() == nullptr && target->hybrid() == nullptr))
    return InvalidArgumentError("{}: eval needs the target loaded on the drafter's device",
                                owner);
  std::unique_ptr<DrafterEval> e(new DrafterEval(settings, profile->Stage("drafter.eval")));
  e->shared_ = std::move(target);
  e->trained_ = &trained;
  e->metrics_ = metrics;
  e->owner_ = std::move(owner);
  e->seed_ = seed;
  const int64_t vocab = e->shared_->dense() ? e->shared_->dense()->config().vocab_size
                                            : e->shared_->hybrid()->config().vocab_size;
  const std::vector<int64_t>& eos = e->shared_->dense()
                                        ? e->shared_->dense()->config().eos_token_ids
                                        : e->shared_->hybrid()->config().eos_token_ids;
  Result<models::PromptSet> prompts =
      models::LoadPromptFile(settings.prompts, vocab, settings.max_prompt_tokens);
  if (!prompts.ok())
    return prompts.status().WithContext(fmt::format("{}: eval.prompts", e->owner_));
  e->prompts_ = std::move(*prompts);
  if (static_cast<int64_t>(e->prompts_.prompts.size()) > settings.max_prompts)
    e->prompts_.prompts.resize(static_cast<size_t>(settings.max_prompts));
  for (const std::string& why : e->prompts_.skip_reasons)
    TLOG_WARN("{}: eval skips {}", e->owner_, why);
  for (int64_t id : eos) e->stop_ids_.push_back(static_cast<int32_t>(id));
  RETURN_IF_ERROR(e->Allocate(*e->shared_, trained));
  return e;
}

Status DrafterEval::Allocate(const SharedTarget& shared, models::DFlashDrafter& trained) {
  const int64_t bs = trained.config().block_size;
  int64_t longest = 0;
  for (const auto& p : prompts_.prompts) longest = std::max<int64_t>(longest, p.size());
  max_context_ = DecodeContext(longest, s_.max_new_tokens, bs);
  const kernels::Stream stream = trained.stream();
  const int64_t max_tokens = DecodeForwardTokens(longest, bs);
  if (shared.dense() != nullptr) {
    const models::Qwen3Target& job = *shared.dense();
    models::Qwen3TargetOptions to;
    to.max_tokens = max_tokens;
    to.stream = stream;
    to.precision = job.precision();
    if (job.precision() == models::TargetPrecision::kFp8) {
      ASSIGN_OR_RETURN(target_, models::Qwen3Target::Create(job.weights().Alias(),
                                                             job.fp8_projections().Alias(), to));
    } else {
      ASSIGN_OR_RETURN(target_, models::Qwen3Target::Create(job.weights().Alias(), to));
    }
  } else {
    const models::Qwen35Target& job = *shared.hybrid();
    ASSIGN_OR_RETURN(hybrid_, models::Qwen35Target::Create(
                                  job.weights().Alias(), job.fp8_projections().Alias(),
                                  {max_tokens, stream, job.precision()}));
  }
  models::DFlashDrafterOptions dopt;
  dopt.max_tokens = max_context_;
  dopt.num_blocks = trained.device().is_cuda() ? models::kDrafterBlocksCuda : 1;
  dopt.shared_weights = &trained.params();
  ASSIGN_OR_RETURN(drafter_,
                   models::DFlashDrafter::Create(trained.config(), dopt, trained.allocator(),
                                                 stream));
  if (target_ != nullptr) {
    ASSIGN_OR_RETURN(decoder_, models::DFlashDecoder::Create(target_.get(), drafter_.get(),
                                                             max_context_, stream));
  } else {
    ASSIGN_OR_RETURN(decoder_, models::DFlashDecoder::Create(hybrid_.get(), drafter_.get(),
                                                             max_context_, stream));
  }
  // What the evaluation holds besides the shared weights (DeviceBytesBound's terms).
  const DecoderShape shape =
      target_ != nullptr ? ShapeOf(target_->config()) : ShapeOf(hybrid_->config());
  const DecoderBuffers buffers = DecoderBufferBytes(
      shape, static_cast<int64_t>(trained.config().target_layer_ids.size()), max_context_, bs);
  const int64_t kv = buffers.kv, features = buffers.features;
  const int64_t target_ws =
      target_ != nullptr ? target_->workspace_bytes() : hybrid_->workspace_bytes();
  const int64_t ws = target_ws + drafter_->workspace_bytes() + decoder_->proposer_bytes();
  const int64_t own = buffers.total() + ws;
  TLOG_INFO("{}: eval every {} steps on {} prompts of {} ({} lines, {} skipped), {} new tokens "
            "each, block size {}, temperature {}; decodes over the job's target weights "
            "(shared) and the trained weights (in place): {} of its own (KV cache {}, "
            "features {}, workspaces {})",
            owner_, s_.every_steps, prompts_.prompts.size(), s_.prompts, prompts_.lines,
            prompts_.skipped, s_.max_new_tokens, s_.block_size, s_.temperature,
            FormatBytes(static_cast<uint64_t>(own)), FormatBytes(static_cast<uint64_t>(kv)),
            FormatBytes(static_cast<uint64_t>(features)),
            FormatBytes(static_cast<uint64_t>(ws)));
  return Status::Ok();
}

bool DrafterEval::Due(int64_t step, bool last) const {
  if (step == last_step_) return false;
  return step % s_.every_steps == 0 || (last && s_.at_end);
}

Result<EvalResult> DrafterEval::Run(int64_t step) {
  ScopedTimer timer(stage_);
  // The optimizer's last update is ordered before the decoder's forwards (one stream).
  RETURN_IF_ERROR(trained_->JoinOptimizer());
  const int64_t t0 = NowNanos();
  models::SpecDecodeOptions o;
  o.max_new_tokens = s_.max_new_tokens;
  o.block_size = s_.block_size;
  o.temperature = static_cast<float>(s_.temperature);
  o.stop_token_ids = stop_ids_;
  std::vector<models::SpecDecodeResult> results;
  for (size_t i = 0; i < prompts_.prompts.size(); ++i) {
    if (s_.max_seconds > 0 && !results.empty() && (NowNanos() - t0) * 1e-9 >= s_.max_seconds)
      break;  // the budget is spent: tau covers the prompts decoded
    o.seed = seed_;  // the same draws at every evaluation: keyed by (seed, prompt, step, slot)
    o.prompt_index = i;
    Result<models::SpecDecodeResult> r = decoder_->Generate(prompts_.prompts[i], o);
    if (!r.ok())
      return r.status().WithContext(
          fmt::format("{}: eval at step {}, prompt {} of {}", owner_, step, i, s_.prompts));
    results.push_back(std::move(*r));
  }
  const double seconds = (NowNanos() - t0) * 1e-9;
  EvalResult out;
  out.stats = models::SummarizeDecodes(results, s_.block_size);
  const models::SpecEvalStats& st = out.stats;
  out.new_best = !best_.has_value() || st.tau > best_->tau;
  if (out.new_best) best_ = BestCheckpoint{step, st.tau, st.prompts};
  ++runs_;
  last_step_ = step;
  last_tau_ = st.tau;
  EvalPoint p;
  p.step = step;
  p.tau = st.tau;
  if (st.accept_rate.size() > 1) p.accept_rate.assign(st.accept_rate.begin() + 1, st.accept_rate.end());
  p.tok_s = st.tokens_per_s;
  p.prompts = st.prompts;
  p.tokens = st.generated_tokens;
  p.verify_steps = st.verify_steps;
  p.seconds = seconds;
  p.block_size = s_.block_size;
  p.temperature = s_.temperature;
  p.best = out.new_best;
  p.best_step = best_->step;
  p.best_tau = best_->tau;
  if (metrics_ != nullptr) metrics_->RecordEval(owner_, p);
  TLOG_INFO("{}: eval at step {}: tau {:.3f}{} over {} prompts ({} verify steps, {} tokens, "
            "{:.1f} tok/s), {:.2f} s", owner_, step, st.tau,
            out.new_best ? " (best so far)"
                         : fmt::format(" (best {:.3f} at step {})", best_->tau, best_->step),
            st.prompts, st.verify_steps, st.generated_tokens, st.tokens_per_s, seconds);
  return out;
}

Status DrafterEval::ResumeBest(const std::string& checkpoint_dir, int64_t step) {
  if (checkpoint_dir.empty() || step == 0) return Status::Ok();
  ASSIGN_OR_RETURN(std::optional<BestCheckpoint> best, ReadBestCheckpoint(checkpoint_dir));
  if (!best || best->step > step) return Status::Ok();
  best_ = best;
  TLOG_INFO("{}: eval resumes with the best tau {:.3f} of step {} ({}/best)", owner_, best->tau,
            best->step, checkpoint_dir);
  return Status::Ok();
}

std::string DrafterEval::Summary() const {
  if (runs_ == 0) return "";
  return fmt::format("evals {}, last tau {:.3f} at step {}, best {:.3f} at step {}", runs_,
                     last_tau_, last_step_, best_->tau, best_->step);
}

}  // namespace tandem::dflash
