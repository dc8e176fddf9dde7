#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "data/tokenizer/json_fields.h"
#include "runtime/core/json_parse.h"

namespace tandem::tokenizer {
namespace {

// GPT-2's pattern, used by ByteLevel with use_regex = true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// HF tokenizers runs Split patterns with Oniguruma, whose \s is Unicode White_Space; PCRE2's
// \s with UCP also takes U+180E (MONGOLIAN VOWEL SEPARATOR). Spell \s and \S out as the
// White_Space set so both engines split alike.
constexpr const char* kWhiteSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

Result<std::string> WithUnicodeWhiteSpace(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[++i];
      if (n == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (n == 'S') {
        if (in_class) {
          return InvalidArgumentError("tokenizer.json: Split pattern '{}': \\S inside a "
                                      "character class is not implemented", pattern);
        }
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

std::string PcreMessage(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct RegexScratch::Impl {
  pcre2_match_data* match = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  int64_t budget = RegexScratch::kTextBudget;  // match steps left for retries (see the header)
};

void RegexScratch::StartText(size_t bytes) {
  impl_->budget = kTextBudget + kBudgetPerByte * static_cast<int64_t>(bytes);
}

RegexScratch::RegexScratch() : impl_(std::make_unique<Impl>()) {
  impl_->match = pcre2_match_data_create(4, nullptr);
  impl_->stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
  impl_->context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack_assign(impl_->context, nullptr, impl_->stack);
}
RegexScratch::~RegexScratch() {
  if (!impl_) return;
  pcre2_match_data_free(impl_->match);
  pcre2_match_context_free(impl_->context);
  pcre2_jit_stack_free(impl_->stack);
}
RegexScratch::RegexScratch(RegexScratch&&) noexcept = default;
RegexScratch& RegexScratch::operator=(RegexScratch&& o) noexcept {
  if (this != &o) {
    RegexScratch dying(std::move(*this));
    impl_ = std::move(o.impl_);
  }
  return *this;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string pattern;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Result<Regex> Regex::Compile(const std::string& pattern) {
  ASSIGN_OR_RETURN(const std::string translated, WithUnicodeWhiteSpace(pattern));
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code) {
    return InvalidArgumentError("tokenizer.json: Split pattern '{}' does not compile at {}: {}",
                                pattern, offset, PcreMessage(err));
  }
  Regex r;
  r.code_ = std::make_unique<Code>();
  r.code_->code = code;
  r.code_->pattern = pattern;
  r.code_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

// One match at `pos`, within the scratch's budget: PCRE2's return code, or
// PCRE2_ERROR_MATCHLIMIT once the budget is spent.
int Regex::Match(std::string_view text, size_t pos, RegexScratch& scratch) const {
  auto* s = scratch.impl();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (uint32_t limit = RegexScratch::kFirstLimit;; limit *= 2) {
    pcre2_set_match_limit(s->context, limit);
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), pos, 0,
                                                s->match, s->context)
                              : pcre2_match(code_->code, subject, text.size(), pos,
                                            PCRE2_NO_UTF_CHECK, s->match, s->context);
    if (rc != PCRE2_ERROR_MATCHLIMIT) return rc;
    // The next try may take up to twice the steps: charge them first.
    s->budget -= int64_t{limit} * 2;
    if (s->budget < 0 || limit > (uint32_t{1} << 30)) return PCRE2_ERROR_MATCHLIMIT;
  }
}

Status Regex::SplitIsolated(std::string_view text, RegexScratch& scratch,
                            std::vector<std::pair<size_t, size_t>>* pieces) const {
  auto* s = scratch.impl();
  size_t pos = 0, gap = 0;
  while (pos < text.size()) {
    const int rc = Match(text, pos, scratch);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT) {
      return InvalidArgumentError(
          "tokenizer: pattern '{}' backtracks too much on this text (its match budget of {} "
          "steps for {} bytes ran out at byte {})",
          code_->pattern,
          RegexScratch::kTextBudget + RegexScratch::kBudgetPerByte * int64_t(text.size()),
          text.size(), pos);
    }
    if (rc < 0) {
      return InternalError("tokenizer: pattern '{}' failed at byte {}: {}", code_->pattern, pos,
                           PcreMessage(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s->match);
    const size_t b = ov[0], e = ov[1];
    if (e == b) {  // an empty match: step over one code point
      pos = b + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (b > gap) pieces->emplace_back(gap, b);
    pieces->emplace_back(b, e);
    gap = pos = e;
  }
  if (gap < text.size()) pieces->emplace_back(gap, text.size());
  return Status::Ok();
}

Result<PreTokenizer> PreTokenizer::Build(const nlohmann::json& spec, const std::string& field) {
  PreTokenizer p;
  if (spec.is_null()) return p;
  RETURN_IF_ERROR(ExpectObjectOrNull(spec, field));
  ASSIGN_OR_RETURN(const std::string type, StringField(spec, "type", field));
  if (type == "Sequence") {
    ASSIGN_OR_RETURN(const nlohmann::json subs, ArrayField(spec, "pretokenizers", field));
    for (size_t k = 0; k < subs.size(); ++k) {
      ASSIGN_OR_RETURN(PreTokenizer inner,
                       Build(subs[k], fmt::format("{}.pretokenizers[{}]", field, k)));
      for (auto& st : inner.steps_) p.steps_.push_back(std::move(st));
    }
    return p;
  }
  if (type == "Split") {
    const nlohmann::json pat = spec.contains("pattern") ? spec["pattern"] : nlohmann::json();
    if (!pat.is_object() || !pat.contains("Regex") || !pat["Regex"].is_string()) {
      return InvalidArgumentError(
          "tokenizer.json: {} Split with pattern {} is not implemented (only Regex)", field,
          DescribeJson(pat));
    }
    ASSIGN_OR_RETURN(const std::string behavior, StringField(spec, "behavior", field));
    ASSIGN_OR_RETURN(const bool invert, BoolField(spec, "invert", field, false));
    if (behavior != "Isolated" || invert) {
      return InvalidArgumentError(
          "tokenizer.json: {} Split behavior '{}'{} is not implemented (only Isolated, not "
          "inverted)",
          field, behavior, invert ? " inverted" : "");
    }
    ASSIGN_OR_RETURN(Regex r, Regex::Compile(pat["Regex"].get<std::string>()));
    p.steps_.push_back({std::make_shared<const Regex>(std::move(r)), false});
    return p;
  }
  if (type == "ByteLevel") {
    ASSIGN_OR_RETURN(const bool prefix, BoolField(spec, "add_prefix_space", field, false));
    if (prefix) p.steps_.push_back({nullptr, true});
    ASSIGN_OR_RETURN(const bool use_regex, BoolField(spec, "use_regex", field, true));
    if (use_regex) {
      ASSIGN_OR_RETURN(Regex r, Regex::Compile(kGpt2Pattern));
      p.steps_.push_back({std::make_shared<const Regex>(std::move(r)), false});
    }
    return p;
  }
  return InvalidArgumentError("tokenizer.json: {} type '{}' is not implemented", field,
                              type.empty() ? DescribeJson(spec) : type);
}

Status PreTokenizer::Split(std::string_view text, RegexScratch& scratch,
                           std::vector<std::string>* pieces) const {
  std::vector<std::string> cur{std::string(text)}, next;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const Step& st : steps_) {
    next.clear();
    for (std::string& piece : cur) {
      if (st.add_prefix_space) {
        if (piece.empty() || piece[0] != ' ') piece.insert(piece.begin(), ' ');
        next.push_back(std::move(piece));
        continue;
      }
      ranges.clear();
      RETURN_IF_ERROR(st.regex->SplitIsolated(piece, scratch, &ranges));
      for (auto [b, e] : ranges) next.emplace_back(piece.substr(b, e - b));
    }
    cur.swap(next);
  }
  for (auto& piece : cur) pieces->push_back(std::move(piece));
  return Status::Ok();
}

}  // namespace tandem::tokenizer
