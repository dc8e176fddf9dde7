// The prompts of `tandem eval`: a JSONL file, one prompt per line, in one of these layouts,
// detected per file from its first JSON object with a known key (or given, --format):
//   ids        {"input_ids": [...]} (or "prompt_ids", "ids", "tokens"): token ids as is;
//   openai     {"messages": [{"role", "content"}, ...]};
//   sharegpt   {"conversations": [{"from", "value"}, ...]};
//   mt-bench   {"turns": ["...", ...]}: the first turn;
//   gsm8k      {"question": "..."};
//   math500    {"problem": "..."};
//   humaneval  {"prompt": "..."};
//   mbpp       {"text": "..."} (or "prompt" with "test_list", the sanitized set).
// Chat layouts are rendered with the model's own chat template (a trailing assistant turn
// dropped, add_generation_prompt=true) and tokenized; the single-text layouts become one
// user message rendered and tokenized the same way.
// Every layout but ids needs the model's tokenizer (chat_data::ChatEncoder: tokenizer.json +
// tokenizer_config.json's chat_template). Blank lines are ignored.
//
// Bad lines, each with a reason code: malformed (not JSON, not an object, no field of the
// file's layout, a wrong type), empty (no ids, empty text), bad_token_id (an id outside
// [0, vocab)), too_long (more tokens than max_tokens; the limit's origin is named),
// template_error (template or tokenizer failure), line_too_long (more bytes than
// max_line_bytes: neither parsed nor tokenized). Without skip_bad the first one is an
// InvalidArgument naming file:line and why; with skip_bad it is skipped and counted. A file
// with no line at all, or no usable prompt, is an InvalidArgument naming the file.
//
// Thread-safety: pure functions over caller-owned values (the encoder is only read).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat/chat_encoder.h"
#include "runtime/core/status.h"

namespace tandem::models {

enum class PromptFormat {
  kAuto, kIds, kOpenAI, kShareGpt, kMtBench, kGsm8k, kMath500, kHumanEval, kMbpp
};

// "auto", "ids", "openai", "sharegpt", "mt-bench", "gsm8k", "math500", "humaneval", "mbpp";
// InvalidArgument listing them otherwise.
Result<PromptFormat> ParsePromptFormat(std::string_view name);
const char* PromptFormatName(PromptFormat f);
// The layout of one line by its keys (kAuto: not a JSON object with a known key).
PromptFormat DetectPromptFormat(std::string_view line);

struct PromptLoadOptions {
  PromptFormat format = PromptFormat::kAuto;
  bool skip_bad = false;
  int64_t vocab = 0;       // ids must be in [0, vocab)
  int64_t max_tokens = 0;  // longest prompt; 0: no limit
  int64_t max_line_bytes = int64_t{4} << 20;  // longer lines are bad, unparsed; 0: no limit
  std::string max_tokens_origin;  // what sets max_tokens, for messages ("" = "the limit")
  // The tokenizer and chat template, needed by every layout but ids: `encoder` when set,
  // else loaded from `tokenizer_dir` (tokenizer.json + tokenizer_config.json, usually the
  // target's directory) once a line needs it. Neither: such a file is an InvalidArgument.
  const chat_data::ChatEncoder* encoder = nullptr;
  std::string tokenizer_dir;
  // Passed to the template as enable_thinking when set (e.g. Qwen3's), with tokenizer_dir.
  std::optional<bool> enable_thinking;
};

struct PromptSet {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> line_numbers;  // the file line of each prompt (1-based)
  PromptFormat format = PromptFormat::kAuto;  // the layout read (detected or given)
  int64_t lines = 0;    // non-blank lines read
  int64_t skipped = 0;  // lines not used (skip_bad)
  std::map<std::string, int64_t> skipped_by_reason;
  std::vector<std::string> skip_reasons;  // the first 8, "file:line: why"
};

// Reads `text` (`source` names it in messages).
Result<PromptSet> ReadPromptSet(std::string_view text, const std::string& source,
                                const PromptLoadOptions& options);
// Reads the file at `path` (NotFound when missing).
Result<PromptSet> LoadPromptSet(const std::string& path, const PromptLoadOptions& options);

}  // namespace tandem::models
