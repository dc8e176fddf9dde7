// One `tandem eval` run as a library call: load a target (Qwen3, Qwen3-MoE or Llama by the
// dense loader, or the Qwen3.5 / 3.6 hybrid, dense or MoE; decode_target.h picks the family
// by config.json's model_type) and a DFlash drafter from their HF directories, check they
// fit (before any weights are read), read the prompt file (prompt_set.h: ids, chat or a
// public set's layout, bad lines refused or skipped), decode every prompt at block size B
// and again at block size 1 (`batch` prompts at a time, the dense loader's targets only;
// each run timed by its wall clock), greedy; with temperature > 0 once more at block size B
// by speculative sampling (spec_pick.h: temperature, top_p, top_k, draws keyed by (seed,
// prompt index, step, position), so the run repeats bit for bit at any batch); and
// summarize (spec_eval.h).
//
// Thread-safety: one call at a time per device (it owns the models it loads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/core/dtype.h"
#include "models/speculative/spec_eval.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct SpecEvalRequest {
  std::string target_dir;   // config.json + *.safetensors (decode_target.h's model_types)
  std::string drafter_dir;  // DFlashDraftModel config.json + model.safetensors; "" = none
  std::string prompts_file;
  kernels::Device device = kernels::Device::Cpu();
  int64_t max_new_tokens = 128;
  int64_t block_size = 0;     // 0: the drafter's block size
  float temperature = 0.0f;  // > 0: also the sampled run at this temperature
  float top_p = 1.0f;        // (0, 1]: the sampled run's nucleus (1: off)
  int64_t top_k = 0;         // >= 0: the sampled run's top-k (0: off)
  uint64_t seed = 0;         // the sampled run's draws
  bool greedy_drafts = false;  // the sampled run's drafts: the drafter's argmax (q one-hot)
  int64_t max_prompt_tokens = 4096;  // longer prompts are bad lines (prompt_set.h), as are
                                     // those past max_position_embeddings - max_new_tokens
                                     // - block_size + 1
  PromptFormat prompt_format = PromptFormat::kAuto;
  bool skip_bad = false;       // skip and count bad prompt lines instead of failing
  int64_t max_line_bytes = int64_t{4} << 20;  // longer prompt lines are bad (0: no limit)
  std::string tokenizer_dir;   // for text and chat prompts; "": the target's directory
  std::optional<bool> enable_thinking;  // the chat template's enable_thinking, when set
  int64_t batch = 1;           // sequences decoded at once (DFlashBatchDecoder when > 1)
  int64_t max_prompts = 0;           // 0: all
  bool baseline = true;              // also decode at block size 1 for the speedup
  std::vector<int32_t> stop_token_ids;  // empty: the target's eos_token_id if it has one
};

Result<SpecEvalReport> RunSpecEval(const SpecEvalRequest& request);

}  // namespace tandem::models
