// Pre-tokenization of tokenizer.json: the `Split` regex (behavior "Isolated": every match and
// every stretch between matches is a piece) compiled with PCRE2 (UTF + Unicode properties,
// JIT), and ByteLevel (optional prefix space; with use_regex, GPT-2's split pattern).
// Supported shapes: Split, ByteLevel, or a Sequence of them. Anything else is refused with
// an error naming the type.
//
// Thread-safety: a PreTokenizer is immutable after Build and safe to share; each thread
// passes its own RegexScratch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/core/status.h"

namespace tandem::tokenizer {

// Per-thread PCRE2 match data and JIT stack, and the match budget of the text being split.
//
// PCRE2's match limit holds per call, and splitting makes a call per piece, so a pattern that
// backtracks heavily at every position costs the per-call limit times the text's length (a
// catastrophic pattern took minutes on a 5 KB line). The budget bounds the whole text
// instead: every call starts with a small limit (kFirstLimit) and retries with twice the limit
// while it runs out; each limit beyond the first that a call needed is charged to the budget.
// A text whose calls exhaust it is an error. A text of n bytes so costs at most about
// n * kFirstLimit + StartText's budget match steps; ordinary patterns (GPT-2's, Llama-3's,
// Qwen's) never retry.
class RegexScratch {
 public:
  static constexpr uint32_t kFirstLimit = 10'000;         // match steps per call at first
  static constexpr int64_t kTextBudget = 10'000'000;      // per text, plus kBudgetPerByte * n
  static constexpr int64_t kBudgetPerByte = 64;

  RegexScratch();
  ~RegexScratch();
  RegexScratch(RegexScratch&&) noexcept;
  RegexScratch& operator=(RegexScratch&&) noexcept;
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

  // Starts the budget of a text of `bytes` bytes: kTextBudget + kBudgetPerByte * bytes match
  // steps beyond kFirstLimit per call. Until the first call, the budget is kTextBudget.
  void StartText(size_t bytes);

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// A compiled pattern. Move-only.
class Regex {
 public:
  // InvalidArgument naming the pattern and PCRE2's message when it does not compile.
  static Result<Regex> Compile(const std::string& pattern);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Appends [begin, end) byte ranges of `text` split "Isolated": matches and the gaps
  // between them, in order, covering `text`. InvalidArgument naming the pattern when the
  // scratch's match budget runs out (RegexScratch). REQUIRES: text is valid UTF-8.
  Status SplitIsolated(std::string_view text, RegexScratch& scratch,
                       std::vector<std::pair<size_t, size_t>>* pieces) const;

 private:
  Regex() = default;
  int Match(std::string_view text, size_t pos, RegexScratch& scratch) const;
  struct Code;
  std::unique_ptr<Code> code_;
};

class PreTokenizer {
 public:
  // `spec` is tokenizer.json's "pre_tokenizer" (null: the whole text is one piece).
  static Result<PreTokenizer> Build(const nlohmann::json& spec,
                                    const std::string& field = "pre_tokenizer");

  // Appends the pieces of `text` (raw bytes; the byte-level mapping is BPE's business).
  Status Split(std::string_view text, RegexScratch& scratch,
               std::vector<std::string>* pieces) const;

  // The regex when the pre-tokenizer is exactly one Split (the Qwen and Llama-3 shape), so
  // callers can split without copying pieces; nullptr otherwise.
  const Regex* sole_regex() const {
    return steps_.size() == 1 && steps_[0].regex ? steps_[0].regex.get() : nullptr;
  }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: only a prefix space
    bool add_prefix_space = false;
  };
  std::vector<Step> steps_;
};

}  // namespace tandem::tokenizer
