// Pre-tokenization of tokenizer.json: the `Split` regex (behavior "Isolated": every match and
// every stretch between matches is a piece) compiled with PCRE2 (UTF + Unicode properties,
// JIT), and ByteLevel (optional prefix space; with use_regex, GPT-2's split pattern).
// Supported shapes: Split, ByteLevel, or a Sequence of them. Anything else is refused with
// an error naming the type.
//
// Thread-safety: a PreTokenizer is immutable after Build and safe to share; each thread
// passes its own RegexScratch.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/core/status.h"

namespace tandem::tokenizer {

// Per-thread PCRE2 match data and JIT stack. Move-only.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(RegexScratch&&) noexcept;
  RegexScratch& operator=(RegexScratch&&) noexcept;
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

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
  // between them, in order, covering `text`. REQUIRES: text is valid UTF-8.
  Status SplitIsolated(std::string_view text, RegexScratch& scratch,
                       std::vector<std::pair<size_t, size_t>>* pieces) const;

 private:
  Regex() = default;
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
