#include "runtime/job/toml_text_depth.h"

#include <vector>

namespace tandem {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, int max_depth) : t_(text), max_(max_depth) {}

  // Returns the byte offset where the depth first passes max_depth, or npos. Depths count as
  // the parsed table's do: the root is 0, `[a.b]` is 2, and its `c.d = 1` puts 1 at 4.
  size_t Run() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '"' || c == '\'') {
        SkipString(c);
        continue;
      }
      if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
        continue;
      }
      if (c == '\n') {
        ++line_;
        if (stack_.empty()) {
          line_start_ = true;
          StartKey();
        }
      } else if (c == ' ' || c == '\t' || c == '\r') {
        // whitespace keeps the state
      } else if (stack_.empty() && line_start_ && c == '[') {
        if (const size_t at = Header(); at != npos) return at;
        continue;
      } else if (key_) {
        line_start_ = false;
        if (key_start_ == npos) key_start_ = i_;
        if (c == '.') {
          ++dots_;
        } else if (c == '=') {
          key_ = false;
          value_depth_ = Base() + dots_ + 1;
          if (value_depth_ > max_) return key_start_;
        }
      } else if (c == '{' || c == '[') {
        const int d = stack_.empty() || stack_.back().brace ? value_depth_ : stack_.back().depth;
        stack_.push_back({c == '{', c == '{' ? d : d + 1});
        if (stack_.back().depth > max_) return i_;
        if (c == '{') StartKey();
      } else if (c == '}' || c == ']') {
        if (!stack_.empty()) stack_.pop_back();
      } else if (c == ',' && !stack_.empty() && stack_.back().brace) {
        StartKey();
      }
      ++i_;
    }
    return npos;
  }

  int line() const { return line_; }
  static constexpr size_t npos = std::string_view::npos;

 private:
  struct Open {
    bool brace;  // an inline table; else an array
    int depth;   // the depth of what it holds
  };

  int Base() const { return stack_.empty() ? header_depth_ : stack_.back().depth; }

  void StartKey() {
    key_ = true;
    dots_ = 0;
    key_start_ = npos;
  }

  // `[a.b]` or `[[a.b]]` at the start of a line: sets header_depth_.
  size_t Header() {
    const size_t start = i_;
    const bool array = i_ + 1 < t_.size() && t_[i_ + 1] == '[';
    i_ += array ? 2 : 1;
    int parts = 1;
    while (i_ < t_.size() && t_[i_] != ']' && t_[i_] != '\n') {
      if (t_[i_] == '"' || t_[i_] == '\'') {
        SkipString(t_[i_]);
        continue;
      }
      if (t_[i_] == '.') ++parts;
      ++i_;
    }
    header_depth_ = parts + (array ? 1 : 0);
    if (header_depth_ > max_) return start;
    while (i_ < t_.size() && t_[i_] == ']') ++i_;
    line_start_ = false;
    StartKey();
    return npos;
  }

  // Past a string starting at i_ with quote `q` (single or triple).
  void SkipString(char q) {
    if (key_ && key_start_ == npos) key_start_ = i_;
    const bool triple = t_.substr(i_, 3) == std::string(3, q);
    i_ += triple ? 3 : 1;
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '\\' && q == '"') {
        i_ += 2;
        continue;
      }
      if (c == '\n') {
        if (!triple) return;  // unterminated: the parser says so; Run counts the newline
        ++line_;
      }
      if (c == q && (!triple || t_.substr(i_, 3) == std::string(3, q))) {
        i_ += triple ? 3 : 1;
        return;
      }
      ++i_;
    }
  }

  std::string_view t_;
  const int max_;
  size_t i_ = 0;
  int line_ = 1;
  bool line_start_ = true;
  bool key_ = true;
  int dots_ = 0;
  size_t key_start_ = npos;
  int header_depth_ = 0;
  int value_depth_ = 0;
  std::vector<Open> stack_;
};

}  // namespace

Status CheckTomlTextDepth(std::string_view text, const std::string& path, int max_depth) {
  Scanner s(text, max_depth);
  const size_t at = s.Run();
  if (at == Scanner::npos) return Status::Ok();
  std::string_view key = text.substr(at, 80);
  if (const size_t nl = key.find('\n'); nl != std::string_view::npos) key = key.substr(0, nl);
  return InvalidArgumentError("{}:{}: {}...: tables and arrays nested deeper than {} levels; a "
                              "job file needs a few", path, s.line(), key, max_depth);
}

}  // namespace tandem
