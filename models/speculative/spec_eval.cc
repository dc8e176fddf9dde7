#include "models/speculative/spec_eval.h"

#include <string>

#include <fmt/format.h>

#include "models/io/file_util.h"

namespace tandem::models {

Result<PromptSet> ParsePrompts(std::string_view text, const std::string& source, int64_t vocab,
                               int64_t max_tokens) {
  PromptLoadOptions o;
  o.skip_bad = true;
  o.vocab = vocab;
  o.max_tokens = max_tokens;
  return ReadPromptSet(text, source, o);
}

Result<PromptSet> LoadPromptFile(const std::string& path, int64_t vocab, int64_t max_tokens) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParsePrompts(text, path, vocab, max_tokens);
}

SpecEvalStats SummarizeDecodes(std::span<const SpecDecodeResult> results, int64_t block_size,
                               double wall_seconds) {
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
  if (wall_seconds > 0) s.seconds = wall_seconds;
  if (s.seconds > 0) s.tokens_per_s = static_cast<double>(s.generated_tokens) / s.seconds;
  return s;
}

namespace {

constexpr const char* kGreedyRule =
    "greedy: drafts accepted while equal to the target's argmax, plus the target's next token";
constexpr const char* kSampledRule =
    "speculative sampling: drafts sampled from the drafter's filtered distribution q (a DFlash2 "
    "drafter's: its selector's softmax over its candidates), each kept "
    "with probability min(1, p/q) under the target's filtered distribution p, the first "
    "rejected slot redrawn from max(0, p - q), a bonus token from p when all are kept";
constexpr const char* kGreedyDraftRule =
    "speculative sampling with greedy drafts: the drafter's argmax (a DFlash2 drafter's: its "
    "selector's greedy walk; q one-hot), each kept with "
    "probability p(x) under the target's filtered distribution p, the first rejected slot "
    "redrawn from p without the draft, a bonus token from p when all are kept";

// A float setting as the user wrote it: the shortest decimal that reads back as the same
// float (0.7f is written 0.7, not 0.699999988079071).
double AsWritten(float x) { return std::stod(fmt::format("{}", x)); }

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
                      {"version", 2},
                      {"target", r.target},
                      {"drafter", r.drafter},
                      {"prompts_file", r.prompts_file},
                      {"device", r.device},
                      {"temperature", 0.0},
                      {"acceptance_rule", kGreedyRule},
                      {"max_new_tokens", r.max_new_tokens},
                      {"batch", r.batch},
                      {"prompt_format", r.prompt_format},
                      {"prompt_lines", r.prompt_lines},
                      {"prompts_skipped", r.prompts_skipped},
                      {"skipped_by_reason", r.skipped_by_reason},
                      {"skip_reasons", r.skip_reasons},
                      {"run", StatsJson(r.run)}};
  if (r.baseline.prompts > 0) {
    j["baseline"] = StatsJson(r.baseline);
    j["speedup"] = r.baseline.tokens_per_s > 0 ? r.run.tokens_per_s / r.baseline.tokens_per_s
                                               : 0.0;
  }
  if (r.sampled.prompts > 0)
    j["sampled"] = {{"temperature", AsWritten(r.sampling.temperature)},
                    {"top_p", AsWritten(r.sampling.top_p)},
                    {"top_k", r.sampling.top_k},
                    {"seed", r.seed},
                    {"drafts", r.greedy_drafts ? "greedy" : "sampled"},
                    {"acceptance_rule", r.greedy_drafts ? kGreedyDraftRule : kSampledRule},
                    {"run", StatsJson(r.sampled)}};
  return j;
}

std::string FormatSpecEvalReport(const SpecEvalReport& r) {
  std::string out;
  out += fmt::format("tandem eval  target {}  drafter {}\n", r.target, r.drafter);
  out += fmt::format("prompts {} ({}, {} of {} lines skipped)  device {}  max new tokens {}  "
                     "batch {}\n",
                     r.run.prompts, r.prompt_format.empty() ? "ids" : r.prompt_format,
                     r.prompts_skipped, r.prompt_lines, r.device, r.max_new_tokens, r.batch);
  for (const auto& [reason, n] : r.skipped_by_reason)
    out += fmt::format("  {} lines skipped as {}\n", n, reason);
  for (const std::string& why : r.skip_reasons) out += fmt::format("  skipped {}\n", why);
  out += fmt::format("\n{:<14} {:<12} {:>8} {:>10} {:>12} {:>10} {:>10}\n", "temperature",
                     "block size", "tau", "steps", "tokens", "seconds", "tokens/s");
  auto row = [&](float t, const SpecEvalStats& s) {
    out += fmt::format("{:<14} {:<12} {:>8.3f} {:>10} {:>12} {:>10.3f} {:>10.1f}\n", t,
                       s.block_size, s.tau, s.verify_steps, s.generated_tokens, s.seconds,
                       s.tokens_per_s);
  };
  row(0.0f, r.run);
  if (r.baseline.prompts > 0) row(0.0f, r.baseline);
  if (r.sampled.prompts > 0) row(r.sampling.temperature, r.sampled);
  if (r.baseline.prompts > 0)
    out += fmt::format("speedup over block size 1 at temperature 0: {:.2f}x\n",
                       r.baseline.tokens_per_s > 0 ? r.run.tokens_per_s / r.baseline.tokens_per_s
                                                   : 0.0);
  if (r.run.accept_rate.size() > 1) {
    const bool both = r.sampled.accept_rate.size() == r.run.accept_rate.size();
    out += fmt::format("\nacceptance by block position (fraction of steps / given the previous "
                       "one){}\n", both ? ": temperature 0 | sampled" : "");
    for (size_t j = 1; j < r.run.accept_rate.size(); ++j) {
      out += fmt::format("  draft {:>2}  {:6.3f}  {:6.3f}", j, r.run.accept_rate[j],
                         r.run.cond_rate[j]);
      if (both)
        out += fmt::format("  |  {:6.3f}  {:6.3f}", r.sampled.accept_rate[j],
                           r.sampled.cond_rate[j]);
      out += "\n";
    }
  }
  out += fmt::format("\nrule at temperature 0: {}\n", kGreedyRule);
  if (r.sampled.prompts > 0)
    out +=
        fmt::format("rule at temperature {} (top-p {}, top-k {}, seed {}): {}\n",
                    r.sampling.temperature, r.sampling.top_p,
                    r.sampling.top_k == 0 ? std::string("off") : std::to_string(r.sampling.top_k),
                    r.seed, r.greedy_drafts ? kGreedyDraftRule : kSampledRule);
  return out;
}

}  // namespace tandem::models
