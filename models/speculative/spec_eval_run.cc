#include "models/speculative/spec_eval_run.h"

#include <algorithm>
#include <optional>

#include "kernels/core/stream.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_config.h"
#include "models/speculative/decode_target.h"

namespace tandem::models {

namespace {

Result<std::vector<SpecDecodeResult>> DecodeAll(DFlashDecoder& decoder, const PromptSet& set,
                                                SpecDecodeOptions o) {
  std::vector<SpecDecodeResult> out;
  for (size_t i = 0; i < set.prompts.size(); ++i) {
    o.seed += 1;  // a different draw per prompt, the same for both block sizes
    auto r = decoder.Generate(set.prompts[i], o);
    if (!r.ok()) return r.status().WithContext(fmt::format("prompt {}", i));
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

Result<SpecEvalReport> RunSpecEval(const SpecEvalRequest& q) {
  if (q.max_new_tokens < 1)
    return InvalidArgumentError("max_new_tokens must be positive, got {}", q.max_new_tokens);
  // The family (dense Qwen3 or the Qwen3.5 hybrid) is the checkpoint's model_type.
  ASSIGN_OR_RETURN(DecodeTargetShape tc, ReadDecodeTargetShape(q.target_dir));
  std::optional<DFlashConfig> dc;
  if (!q.drafter_dir.empty()) {
    ASSIGN_OR_RETURN(dc, LoadDFlashConfig(q.drafter_dir));
    RETURN_IF_ERROR(CheckDrafterFitsTarget(*dc, tc).WithContext(
        fmt::format("drafter {} vs target {}", q.drafter_dir, q.target_dir)));
  }
  const int64_t max_b = dc ? dc->block_size : 1;
  const int64_t b = q.block_size == 0 ? max_b : q.block_size;
  if (b < 1 || b > max_b)
    return InvalidArgumentError("block_size {} not in [1, {}]{}", b, max_b,
                                dc ? " (the drafter's block size)" : " (no drafter given)");
  ASSIGN_OR_RETURN(PromptSet set,
                   LoadPromptFile(q.prompts_file, tc.vocab_size, q.max_prompt_tokens));
  if (q.max_prompts > 0 && static_cast<int64_t>(set.prompts.size()) > q.max_prompts)
    set.prompts.resize(static_cast<size_t>(q.max_prompts));
  int64_t longest = 0;
  for (const auto& p : set.prompts) longest = std::max<int64_t>(longest, p.size());
  const int64_t max_context = longest + q.max_new_tokens + max_b;

  std::optional<kernels::CudaStream> stream;
  kernels::Stream s = nullptr;
  if (q.device.is_cuda()) {
    ASSIGN_OR_RETURN(stream, kernels::CudaStream::Create(q.device.index));
    s = stream->get();
  }
  DecodeTargetOptions to;
  to.max_tokens = std::max(longest, max_b);
  to.capacity = max_context;
  to.max_rollback = max_b;
  to.stream = s;
  ASSIGN_OR_RETURN(std::unique_ptr<DecodeTarget> target,
                   LoadDecodeTarget(q.target_dir, q.device, to));
  std::unique_ptr<DFlashDrafter> drafter;
  if (dc) {
    ASSIGN_OR_RETURN(drafter, DFlashDrafter::Create(
                                  *dc,
                                  {.max_tokens = max_context,
                                   .num_blocks = q.device.is_cuda() ? kDrafterBlocksCuda : 1},
                                  q.device, s));
    RETURN_IF_ERROR(LoadDFlashWeights(q.drafter_dir, *drafter));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<DFlashDecoder> decoder,
                   DFlashDecoder::Create(std::move(target), drafter.get(), max_context, s));

  SpecDecodeOptions o;
  o.max_new_tokens = q.max_new_tokens;
  o.block_size = b;
  o.temperature = q.temperature;
  o.seed = q.seed;
  o.stop_token_ids = q.stop_token_ids;
  if (o.stop_token_ids.empty())
    for (int64_t id : tc.eos_token_ids) o.stop_token_ids.push_back(static_cast<int32_t>(id));

  SpecEvalReport r;
  r.target = q.target_dir;
  r.drafter = q.drafter_dir;
  r.prompts_file = q.prompts_file;
  r.device = q.device.is_cpu() ? "cpu" : fmt::format("cuda:{}", q.device.index);
  r.temperature = q.temperature;
  r.max_new_tokens = q.max_new_tokens;
  r.prompt_lines = set.lines;
  r.prompts_skipped = set.skipped;
  r.skip_reasons = set.skip_reasons;
  ASSIGN_OR_RETURN(std::vector<SpecDecodeResult> run, DecodeAll(*decoder, set, o));
  r.run = SummarizeDecodes(run, b);
  if (q.baseline && b > 1) {
    o.block_size = 1;
    ASSIGN_OR_RETURN(std::vector<SpecDecodeResult> base, DecodeAll(*decoder, set, o));
    r.baseline = SummarizeDecodes(base, 1);
  }
  return r;
}

}  // namespace tandem::models
