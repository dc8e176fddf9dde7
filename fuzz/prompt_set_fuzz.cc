// Fuzzes the prompt files of `tandem eval` (models/speculative/prompt_set.h): token ids, chat
// messages, or one of the benchmark layouts, rendered and tokenized with the Qwen3 tokenizer
// and chat template (fuzz_encoder.h). A bad line is an error or, with skip_bad, a counted
// skip, never an exception; an accepted set has a line number per prompt, in increasing
// order, counts that add up, and only prompts that are non-empty, within max_tokens and
// made of ids in [0, vocab).
//
// Input layout: [flags:1][file]. flags bits 0-3: format (0: auto, then ids, openai,
// sharegpt, mt-bench, gsm8k, math500, humaneval, mbpp; above 8: auto); bit 4: skip_bad;
// bit 5: vocab 1000 instead of the tokenizer's; bit 6: max_tokens = 64; bit 7:
// max_line_bytes = 256.
#include <string>
#include <string_view>

#include "fuzz/fuzz_encoder.h"
#include "fuzz/fuzz_util.h"
#include "models/speculative/prompt_set.h"

using namespace tandem::models;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tandem::fuzz::FixtureEncoder();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const PromptFormat kFormats[] = {
      PromptFormat::kAuto,    PromptFormat::kIds,     PromptFormat::kOpenAI,
      PromptFormat::kShareGpt, PromptFormat::kMtBench, PromptFormat::kGsm8k,
      PromptFormat::kMath500, PromptFormat::kHumanEval, PromptFormat::kMbpp};
  PromptLoadOptions o;
  o.format = kFormats[(flags & 15) < 9 ? (flags & 15) : 0];
  o.skip_bad = (flags & 16) != 0;
  o.encoder = &tandem::fuzz::FixtureEncoder();
  o.vocab = (flags & 32) ? 1000 : int64_t{o.encoder->tokenizer().vocab_bound()};
  if (flags & 64) o.max_tokens = 64;
  if (flags & 128) o.max_line_bytes = 256;
  auto set = ReadPromptSet(text, "prompts.jsonl", o);
  if (!set.ok()) {
    TANDEM_FUZZ_ASSERT(set.status().code() == tandem::StatusCode::kInvalidArgument);
    TANDEM_FUZZ_ASSERT(set.status().message().find("prompts.jsonl") != std::string::npos);
    return 0;
  }
  TANDEM_FUZZ_ASSERT(!set->prompts.empty());
  TANDEM_FUZZ_ASSERT(set->prompts.size() == set->line_numbers.size());
  TANDEM_FUZZ_ASSERT(set->lines == int64_t(set->prompts.size()) + set->skipped);
  TANDEM_FUZZ_ASSERT(o.skip_bad || set->skipped == 0);
  TANDEM_FUZZ_ASSERT(o.format == PromptFormat::kAuto || set->format == o.format);
  int64_t by_reason = 0;
  for (const auto& [reason, n] : set->skipped_by_reason) by_reason += n;
  TANDEM_FUZZ_ASSERT(by_reason == set->skipped);
  int64_t last_line = 0;
  for (size_t k = 0; k < set->prompts.size(); ++k) {
    TANDEM_FUZZ_ASSERT(set->line_numbers[k] > last_line);
    last_line = set->line_numbers[k];
    const auto& p = set->prompts[k];
    TANDEM_FUZZ_ASSERT(!p.empty() && (o.max_tokens == 0 || int64_t(p.size()) <= o.max_tokens));
    for (int32_t id : p) TANDEM_FUZZ_ASSERT(id >= 0 && id < o.vocab);
  }
  return 0;
}
