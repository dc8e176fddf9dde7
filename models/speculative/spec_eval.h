// `tandem eval`'s data and numbers: the prompt file reader and the acceptance statistics
// of a set of speculative decodes (dflash_decoder.h).
//
// Prompt files: prompt_set.h (LoadPromptFile below is its ids reader that skips bad lines).
//
// Statistics (over all verify steps of all prompts):
//   tau          = mean accept length (accepted drafts + the bonus token), as the DFlash
//                  papers and SGLang report it; 1.0 means no draft was ever accepted;
//   accept_rate[j] (j = 1 .. B-1) = fraction of verify steps whose draft j was accepted
//                  (so accept_rate[1] >= accept_rate[2] >= ...);
//   cond_rate[j] = accept_rate[j] / accept_rate[j-1] (accept_rate[0] = 1): the chance draft
//                  j is accepted once j-1 were;
//   tokens_per_s = generated tokens / decode wall time (prefill included).
//
// Thread-safety: pure functions over caller-owned values.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/speculative/dflash_decoder.h"
#include "models/speculative/prompt_set.h"
#include "models/speculative/spec_pick.h"
#include "runtime/core/status.h"

namespace tandem::models {

// LoadPromptSet with the layout detected, bad lines skipped and counted, and no tokenizer
// (so ids only). max_tokens <= 0: no length limit. InvalidArgument when the file holds no
// usable prompt (naming the file and the first skip reason), NotFound when it is missing.
Result<PromptSet> LoadPromptFile(const std::string& path, int64_t vocab, int64_t max_tokens);
// The same over text already in memory (`source` names it in messages).
Result<PromptSet> ParsePrompts(std::string_view text, const std::string& source, int64_t vocab,
                               int64_t max_tokens);

struct SpecEvalStats {
  int64_t block_size = 0;
  int64_t prompts = 0;
  int64_t verify_steps = 0;
  int64_t generated_tokens = 0;
  double seconds = 0;
  double tau = 0;
  double tokens_per_s = 0;
  std::vector<double> accept_rate;  // [B]: index 0 unused (= 1)
  std::vector<double> cond_rate;    // [B]: index 0 unused (= 1)
};

// wall_seconds > 0: the run's wall time (batched decodes overlap, so their own seconds do
// not add up); 0: the sum of the results' seconds.
SpecEvalStats SummarizeDecodes(std::span<const SpecDecodeResult> results, int64_t block_size,
                               double wall_seconds = 0);

// A report: the greedy run at block size B; when baseline.prompts > 0, the same prompts
// greedy at block size 1 (the speedup is the ratio of tokens per second); when
// sampled.prompts > 0, the same prompts at block size B by speculative sampling with
// `sampling` and `seed` (spec_pick.h).
struct SpecEvalReport {
  std::string target, drafter, prompts_file, device;
  SamplingParams sampling;  // of the sampled run (temperature 0: none)
  uint64_t seed = 0;
  bool greedy_drafts = false;  // the sampled run's drafts: the drafter's argmax, q one-hot
  int64_t max_new_tokens = 0;
  std::string prompt_format;  // the layout read (prompt_set.h)
  int64_t batch = 1;          // sequences decoded at once
  int64_t prompt_lines = 0, prompts_skipped = 0;
  std::map<std::string, int64_t> skipped_by_reason;
  std::vector<std::string> skip_reasons;
  SpecEvalStats run, baseline, sampled;
};

nlohmann::json SpecEvalReportToJson(const SpecEvalReport& r);
// Aligned plain-text table for the terminal.
std::string FormatSpecEvalReport(const SpecEvalReport& r);

}  // namespace tandem::models
