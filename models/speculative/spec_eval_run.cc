#include "models/speculative/spec_eval_run.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "kernels/core/device_pools.h"
#include "kernels/core/stream.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_config.h"
#include "models/qwen3/qwen3_target.h"
#include "models/speculative/decode_target.h"
#include "models/speculative/dflash_batch_decoder.h"

namespace tandem::models {

namespace {

// Decodes every prompt, one at a time or `batched` several at a time, prompt i drawing with
// prompt_index i either way. Sets *wall to the run's wall time.
Result<std::vector<SpecDecodeResult>> DecodeAll(DFlashDecoder* single, DFlashBatchDecoder* batched,
                                                const PromptSet& set, SpecDecodeOptions o,
                                                double* wall) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<SpecDecodeResult> out;
  if (batched != nullptr) {
    o.prompt_index = 0;
    ASSIGN_OR_RETURN(out, batched->GenerateAll(set.prompts, o));
  } else {
    for (size_t i = 0; i < set.prompts.size(); ++i) {
      o.prompt_index = i;
      auto r = single->Generate(set.prompts[i], o);
      if (!r.ok())
        return r.status().WithContext(fmt::format("prompt {} (line {})", i,
                                                  set.line_numbers[i]));
      out.push_back(std::move(*r));
    }
  }
  *wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// The prompt file with its limits: --max-prompt-tokens and the target's positions (a prompt
// needs room for max_new_tokens and one block after it).
Result<PromptSet> LoadEvalPrompts(const SpecEvalRequest& q, const DecodeTargetShape& tc,
                                  int64_t b) {
  PromptLoadOptions po;
  po.format = q.prompt_format;
  po.skip_bad = q.skip_bad;
  po.max_line_bytes = q.max_line_bytes;
  po.vocab = tc.vocab_size;
  po.max_tokens = q.max_prompt_tokens;
  po.max_tokens_origin = "--max-prompt-tokens";
  if (tc.max_position_embeddings > 0) {
    const int64_t by_positions = tc.max_position_embeddings - q.max_new_tokens - b + 1;
    if (by_positions < 1)
      return InvalidArgumentError(
          "max_new_tokens {} + block size {} leave no room for a prompt in the target's "
          "max_position_embeddings {}", q.max_new_tokens, b, tc.max_position_embeddings);
    if (po.max_tokens <= 0 || by_positions < po.max_tokens) {
      po.max_tokens = by_positions;
      po.max_tokens_origin = fmt::format(
          "the target's max_position_embeddings {} - max_new_tokens {} - block size {} + 1",
          tc.max_position_embeddings, q.max_new_tokens, b);
    }
  }
  po.tokenizer_dir = q.tokenizer_dir.empty() ? q.target_dir : q.tokenizer_dir;
  po.enable_thinking = q.enable_thinking;
  ASSIGN_OR_RETURN(PromptSet set, LoadPromptSet(q.prompts_file, po));
  if (q.max_prompts > 0 && static_cast<int64_t>(set.prompts.size()) > q.max_prompts) {
    set.prompts.resize(static_cast<size_t>(q.max_prompts));
    set.line_numbers.resize(static_cast<size_t>(q.max_prompts));
  }
  return set;
}

}  // namespace

Result<SpecEvalReport> RunSpecEval(const SpecEvalRequest& q) {
  if (q.max_new_tokens < 1)
    return InvalidArgumentError("max_new_tokens must be positive, got {}", q.max_new_tokens);
  const SamplingParams sampling{q.temperature, q.top_p, q.top_k};
  RETURN_IF_ERROR(CheckSamplingParams(sampling));
  // The family (the dense loader's, MoE or not, or the Qwen3.5 / 3.6 hybrid, MoE or not) is
  // the checkpoint's model_type.
  ASSIGN_OR_RETURN(DecodeTargetShape tc, ReadDecodeTargetShape(q.target_dir));
  std::optional<DFlashConfig> dc;
  if (!q.drafter_dir.empty()) {
    ASSIGN_OR_RETURN(dc, LoadDFlashConfig(q.drafter_dir));
    // A DFlash2 drafter proposes through its candidate selector (dflash2_proposal.h): its
    // top-k and rank within the selector kernels' limits.
    RETURN_IF_ERROR(CheckDFlash2ProposalLimits(*dc, q.device)
                        .WithContext(fmt::format("drafter {}", q.drafter_dir)));
    RETURN_IF_ERROR(CheckDrafterFitsTarget(*dc, tc).WithContext(
        fmt::format("drafter {} vs target {}", q.drafter_dir, q.target_dir)));
  }
  const int64_t max_b = dc ? dc->block_size : 1;
  const int64_t b = q.block_size == 0 ? max_b : q.block_size;
  if (b < 1 || b > max_b)
    return InvalidArgumentError("block_size {} not in [1, {}]{}", b, max_b,
                                dc ? " (the drafter's block size)" : " (no drafter given)");
  if (q.batch < 1) return InvalidArgumentError("batch must be positive, got {}", q.batch);
  ASSIGN_OR_RETURN(PromptSet set, LoadEvalPrompts(q, tc, b));
  int64_t longest = 0;
  for (const auto& p : set.prompts) longest = std::max<int64_t>(longest, p.size());
  const int64_t max_context = longest + q.max_new_tokens + max_b;

  std::optional<kernels::CudaStream> stream;
  kernels::Stream s = nullptr;
  if (q.device.is_cuda()) {
    ASSIGN_OR_RETURN(stream, kernels::CudaStream::Create(q.device.index));
    s = stream->get();
  }
  const int64_t batch = std::min<int64_t>(q.batch, static_cast<int64_t>(set.prompts.size()));
  // Several prompts per forward: the batched decoder drives a Qwen3Target (qwen3, qwen3_moe,
  // llama) directly.
  // One at a time: any family, through its DecodeTarget.
  kernels::DevicePools pools;  // this run's: outlives the targets, drafter and decoders below
  ASSIGN_OR_RETURN(kernels::Allocator * alloc, pools.For(q.device));
  std::unique_ptr<Qwen3Target> dense;
  std::unique_ptr<DecodeTarget> target;
  if (batch > 1) {
    if (tc.hybrid)
      return InvalidArgumentError(
          "batch {}: batched decoding takes the dense loader's targets (qwen3, qwen3_moe, "
          "llama); {} is the Qwen3.5 / 3.6 hybrid (model_type {}): use batch 1", q.batch,
          q.target_dir, tc.model_type);
    Qwen3TargetOptions to;
    to.max_tokens = std::max(longest, batch * max_b);
    to.stream = s;
    ASSIGN_OR_RETURN(dense, Qwen3Target::Load(q.target_dir, *alloc, to));
  } else {
    DecodeTargetOptions to;
    to.max_tokens = std::max(longest, max_b);
    to.capacity = max_context;
    to.max_rollback = max_b;
    to.stream = s;
    ASSIGN_OR_RETURN(target, LoadDecodeTarget(q.target_dir, *alloc, to));
  }
  std::unique_ptr<DFlashDrafter> drafter;
  if (dc) {
    ASSIGN_OR_RETURN(drafter, DFlashDrafter::Create(
                                  *dc,
                                  {.max_tokens = batch * max_context,
                                   .num_blocks = DrafterBlocksForBatch(batch, q.device)},
                                  *alloc, s));
    RETURN_IF_ERROR(LoadDFlashWeights(q.drafter_dir, *drafter));
  }
  std::unique_ptr<DFlashDecoder> single;
  std::unique_ptr<DFlashBatchDecoder> batched;
  if (batch > 1) {
    ASSIGN_OR_RETURN(batched, DFlashBatchDecoder::Create(dense.get(), drafter.get(), batch,
                                                         max_context, s));
  } else {
    ASSIGN_OR_RETURN(single,
                     DFlashDecoder::Create(std::move(target), drafter.get(), max_context, s));
  }

  SpecDecodeOptions o;
  o.max_new_tokens = q.max_new_tokens;
  o.block_size = b;
  o.seed = q.seed;  // the greedy runs draw nothing
  o.stop_token_ids = q.stop_token_ids;
  if (o.stop_token_ids.empty())
    for (int64_t id : tc.eos_token_ids) o.stop_token_ids.push_back(static_cast<int32_t>(id));

  SpecEvalReport r;
  r.target = q.target_dir;
  r.drafter = q.drafter_dir;
  r.prompts_file = q.prompts_file;
  r.device = q.device.is_cpu() ? "cpu" : fmt::format("cuda:{}", q.device.index);
  r.sampling = sampling;
  r.seed = q.seed;
  r.greedy_drafts = q.greedy_drafts;
  r.max_new_tokens = q.max_new_tokens;
  r.prompt_format = PromptFormatName(set.format);
  r.batch = batch;
  r.prompt_lines = set.lines;
  r.prompts_skipped = set.skipped;
  r.skipped_by_reason = set.skipped_by_reason;
  r.skip_reasons = set.skip_reasons;
  double wall = 0;
  ASSIGN_OR_RETURN(std::vector<SpecDecodeResult> run,
                   DecodeAll(single.get(), batched.get(), set, o, &wall));
  r.run = SummarizeDecodes(run, b, wall);
  if (q.baseline && b > 1) {
    o.block_size = 1;
    ASSIGN_OR_RETURN(std::vector<SpecDecodeResult> base,
                     DecodeAll(single.get(), batched.get(), set, o, &wall));
    r.baseline = SummarizeDecodes(base, 1, wall);
  }
  if (sampling.temperature > 0.0f) {
    o.block_size = b;
    o.temperature = sampling.temperature;
    o.top_p = sampling.top_p;
    o.top_k = sampling.top_k;
    o.sample_drafts = !q.greedy_drafts;
    ASSIGN_OR_RETURN(std::vector<SpecDecodeResult> sampled,
                     DecodeAll(single.get(), batched.get(), set, o, &wall));
    r.sampled = SummarizeDecodes(sampled, b, wall);
  }
  return r;
}

}  // namespace tandem::models
