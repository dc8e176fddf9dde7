#include "models/speculative/spec_eval.h"

#include <fmt/format.h>

#include "models/io/file_util.h"

namespace tandem::models {

namespace {

constexpr const char* kIdFields[] = {"input_ids", "prompt_ids", "ids", "tokens"};
constexpr size_t kMaxReasons = 8;

// Empty string when `line` holds a usable prompt (appended to `out`), else why not.
std::string ParseLine(std::string_view line, int64_t vocab, int64_t max_tokens,
                      std::vector<int32_t>* out) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "not valid JSON";
  if (!j.is_object()) return "not a JSON object";
  const nlohmann::json* ids = nullptr;
  for (const char* f : kIdFields)
    if (j.contains(f)) {
      ids = &j[f];
      break;
    }
  if (ids == nullptr) {
    if (j.contains("messages") || j.contains("conversations") || j.contains("prompt") ||
        j.contains("question") || j.contains("turns"))
      return "text or chat prompts need tokenizing first (`tandem data --model DIR`); this "
             "reader takes token ids under \"input_ids\"";
    return "no \"input_ids\" array";
  }
  if (!ids->is_array()) return "\"input_ids\" is not an array";
  if (ids->empty()) return "empty prompt";
  if (max_tokens > 0 && static_cast<int64_t>(ids->size()) > max_tokens)
    return fmt::format("{} tokens, over the limit of {}", ids->size(), max_tokens);
  out->clear();
  for (size_t i = 0; i < ids->size(); ++i) {
    const nlohmann::json& v = (*ids)[i];
    if (!v.is_number_integer()) return fmt::format("id {} is not an integer", i);
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= vocab) return fmt::format("id {} is {}, not in [0, {})", i, id, vocab);
    out->push_back(static_cast<int32_t>(id));
  }
  return "";
}

}  // namespace

Result<PromptSet> ParsePrompts(std::string_view text, const std::string& source, int64_t vocab,
                               int64_t max_tokens) {
  PromptSet set;
  int64_t line_no = 0;
  size_t pos = 0;
  std::vector<int32_t> ids;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    ++set.lines;
    const std::string why = ParseLine(line, vocab, max_tokens, &ids);
    if (why.empty()) {
      set.prompts.push_back(ids);
      continue;
    }
    ++set.skipped;
    if (set.skip_reasons.size() < kMaxReasons)
      set.skip_reasons.push_back(fmt::format("{}:{}: {}", source, line_no, why));
  }
  if (set.prompts.empty())
    return InvalidArgumentError("{}: no usable prompt ({} lines{}{})", source, set.lines,
                                set.skip_reasons.empty() ? "" : "; first problem: ",
                                set.skip_reasons.empty() ? "" : set.skip_reasons[0]);
  return set;
}

Result<PromptSet> LoadPromptFile(const std::string& path, int64_t vocab, int64_t max_tokens) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParsePrompts(text, path, vocab, max_tokens);
}

SpecEvalStats SummarizeDecodes(std::span<const SpecDecodeResult> results, int64_t block_size) {
  SpecEvalStats s;
  s.block_size = block_size;
  s.prompts = static_cast<int64_t>(results.size());
  std::vector<int64_t> reached(static_cast<size_t>(std::max<int64_t>(block_size, 1)), 0);
  int64_t accepted_sum = 0;
  for (const SpecDecodeResult& r : results) {
    s.generated_tokens += static_cast<int64_t>(r.tokens.size());
    s.seconds += r.seconds;
    for (int32_t len : r.accept_lengths) {
      ++s.verify_steps;
      accepted_sum += len;
      for (int64_t j = 1; j < len && j < block_size; ++j) ++reached[j];
    }
  }
  s.accept_rate.assign(reached.size(), 1.0);
  s.cond_rate.assign(reached.size(), 1.0);
  if (s.verify_steps > 0) {
    s.tau = static_cast<double>(accepted_sum) / static_cast<double>(s.verify_steps);
    for (size_t j = 1; j < reached.size(); ++j) {
      s.accept_rate[j] = static_cast<double>(reached[j]) / static_cast<double>(s.verify_steps);
      s.cond_rate[j] = s.accept_rate[j - 1] > 0 ? s.accept_rate[j] / s.accept_rate[j - 1] : 0.0;
    }
  }
  if (s.seconds > 0) s.tokens_per_s = static_cast<double>(s.generated_tokens) / s.seconds;
  return s;
}

namespace {

nlohmann::json StatsJson(const SpecEvalStats& s) {
  nlohmann::json j = {{"block_size", s.block_size},
                      {"prompts", s.prompts},
                      {"verify_steps", s.verify_steps},
                      {"generated_tokens", s.generated_tokens},
                      {"seconds", s.seconds},
                      {"tau", s.tau},
                      {"tokens_per_s", s.tokens_per_s}};
  std::vector<double> rate(s.accept_rate.begin() + (s.accept_rate.empty() ? 0 : 1),
                           s.accept_rate.end());
  std::vector<double> cond(s.cond_rate.begin() + (s.cond_rate.empty() ? 0 : 1),
                           s.cond_rate.end());
  j["accept_rate_by_position"] = rate;
  j["conditional_accept_rate_by_position"] = cond;
  return j;
}

}  // namespace

nlohmann::json SpecEvalReportToJson(const SpecEvalReport& r) {
  nlohmann::json j = {{"format", "tandem-eval"},
                      {"version", 1},
                      {"target", r.target},
                      {"drafter", r.drafter},
                      {"prompts_file", r.prompts_file},
                      {"device", r.device},
                      {"temperature", r.temperature},
                      {"acceptance_rule", r.temperature == 0.0f
                                              ? "greedy: drafts accepted while equal to the "
                                                "target's argmax"
                                              : "sampled: drafts accepted while equal to the "
                                                "target's sample (not rejection sampling)"},
                      {"max_new_tokens", r.max_new_tokens},
                      {"prompt_lines", r.prompt_lines},
                      {"prompts_skipped", r.prompts_skipped},
                      {"skip_reasons", r.skip_reasons},
                      {"run", StatsJson(r.run)}};
  if (r.baseline.prompts > 0) {
    j["baseline"] = StatsJson(r.baseline);
    j["speedup"] = r.baseline.tokens_per_s > 0 ? r.run.tokens_per_s / r.baseline.tokens_per_s
                                               : 0.0;
  }
  return j;
}

std::string FormatSpecEvalReport(const SpecEvalReport& r) {
  std::string out;
  out += fmt::format("tandem eval  target {}  drafter {}\n", r.target, r.drafter);
  out += fmt::format("prompts {} ({} of {} lines skipped)  device {}  temperature {}  "
                     "max new tokens {}\n",
                     r.run.prompts, r.prompts_skipped, r.prompt_lines, r.device, r.temperature,
                     r.max_new_tokens);
  for (const std::string& why : r.skip_reasons) out += fmt::format("  skipped {}\n", why);
  out += fmt::format("\n{:<12} {:>8} {:>10} {:>12} {:>10} {:>10}\n", "block size", "tau",
                     "steps", "tokens", "seconds", "tokens/s");
  auto row = [&](const SpecEvalStats& s) {
    out += fmt::format("{:<12} {:>8.3f} {:>10} {:>12} {:>10.3f} {:>10.1f}\n", s.block_size,
                       s.tau, s.verify_steps, s.generated_tokens, s.seconds, s.tokens_per_s);
  };
  row(r.run);
  if (r.baseline.prompts > 0) {
    row(r.baseline);
    out += fmt::format("speedup over block size 1: {:.2f}x\n",
                       r.baseline.tokens_per_s > 0 ? r.run.tokens_per_s / r.baseline.tokens_per_s
                                                   : 0.0);
  }
  if (r.run.accept_rate.size() > 1) {
    out += "\nacceptance by block position (fraction of steps / given the previous one)\n";
    for (size_t j = 1; j < r.run.accept_rate.size(); ++j)
      out += fmt::format("  draft {:>2}  {:6.3f}  {:6.3f}\n", j, r.run.accept_rate[j],
                         r.run.cond_rate[j]);
  }
  out += fmt::format("\nrule: {}\n", r.temperature == 0.0f
                                         ? "greedy (temperature 0), drafts accepted while equal "
                                           "to the target's argmax, plus the target's next token"
                                         : "target samples; drafts accepted while equal to its "
                                           "samples, plus its next token");
  return out;
}

}  // namespace tandem::models
