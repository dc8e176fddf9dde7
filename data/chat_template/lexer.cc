#include "data/chat_template/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace tandem::chat_template {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int CountLines(const std::string& s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to; ++i) n += s[i] == '\n';
  return n;
}

// Index of the closing delimiter `close` of a tag whose inside starts at `from`, skipping
// quoted strings; npos when missing.
size_t FindClose(const std::string& s, size_t from, const char* close) {
  char quote = 0;
  for (size_t i = from; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (close[0] != '#' && (c == '"' || c == '\'')) {
      quote = c;
      continue;
    }
    if (c == close[0] && s[i + 1] == close[1]) return i;
  }
  return std::string::npos;
}

}  // namespace

Result<std::vector<Segment>> SplitTemplate(const std::string& src_in) {
  std::string src = src_in;
  if (!src.empty() && src.back() == '\n') {
    src.pop_back();
    if (!src.empty() && src.back() == '\r') src.pop_back();
  }
  std::vector<Segment> out;
  std::string text;
  int line = 1;
  size_t pos = 0;
  bool strip_next = false;     // '-' before the last closing delimiter
  bool trim_next = false;      // trim_blocks: drop one newline after a block/comment tag
  bool line_starting = true;   // the last tag's match ended a line (jinja2's lexer)
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#') {
      open = src.find('{', open + 1);
    }
    if (open != std::string::npos && open + 1 >= src.size()) open = std::string::npos;
    const size_t text_end = open == std::string::npos ? src.size() : open;
    text = src.substr(pos, text_end - pos);
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && IsSpace(text[k])) ++k;
      line_starting = k > 0 && text[k - 1] == '\n';
      text.erase(0, k);
    } else if (trim_next && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      line_starting = true;
    } else if (trim_next && text.size() >= 2 && text[0] == '\r' && text[1] == '\n') {
      text.erase(0, 2);
      line_starting = true;
    }
    const int text_line = line;
    line += CountLines(src, pos, text_end);
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
      break;
    }
    const char kind = src[open + 1];
    size_t inside = open + 2;
    bool lstrip = kind != '{';
    if (inside < src.size() && src[inside] == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
      ++inside;
      lstrip = false;
    } else if (inside < src.size() && src[inside] == '+') {
      ++inside;
      lstrip = false;
    }
    if (lstrip) {
      // lstrip_blocks: spaces and tabs between a line start and a block tag go.
      const size_t nl = text.rfind('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || line_starting) &&
          text.find_first_not_of(" \t", from) == std::string::npos) {
        text.erase(from);
      }
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, text_line});
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = FindClose(src, inside, close);
    if (end == std::string::npos) {
      return InvalidArgumentError("chat_template:{}: '{{{}' is never closed", line, kind);
    }
    size_t body_end = end;
    strip_next = end > inside && src[end - 1] == '-';
    if (strip_next) --body_end;
    const int tag_line = line;
    line += CountLines(src, open, end + 2);
    if (kind != '#') {
      out.push_back({kind == '{' ? Segment::Kind::kExpr : Segment::Kind::kStmt,
                     src.substr(inside, body_end - inside), tag_line});
    }
    trim_next = kind != '{';
    line_starting = false;
    pos = end + 2;
  }
  return out;
}

Result<std::vector<Token>> Tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, s.substr(i, j - i)});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      bool is_float = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        is_float = true;
        ++j;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      std::string num;
      for (size_t k = i; k < j; ++k) {
        if (s[k] != '_') num += s[k];
      }
      Token t{is_float ? Token::Kind::kFloat : Token::Kind::kInt, num};
      if (is_float) t.f = std::strtod(num.c_str(), nullptr);
      else {
        errno = 0;
        t.i = std::strtoll(num.c_str(), nullptr, 10);
        if (errno == ERANGE) {  // strtoll clamps; Python would keep the exact integer
          return InvalidArgumentError("chat_template:{}: the integer {} does not fit 64 bits",
                                      line, num.size() > 40 ? num.substr(0, 40) + "..." : num);
        }
      }
      out.push_back(t);
      i = j;
      continue;
    }
    if (c == '"' || c == '\'') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          v += s[j];
          continue;
        }
        const char e = s[++j];
        switch (e) {
          case 'n': v += '\n'; break;
          case 't': v += '\t'; break;
          case 'r': v += '\r'; break;
          case '\\': v += '\\'; break;
          case '\'': v += '\''; break;
          case '"': v += '"'; break;
          case '0': v += '\0'; break;
          case '\n': break;
          default:
            v += '\\';
            v += e;
        }
      }
      if (j >= s.size()) return InvalidArgumentError("chat_template:{}: unterminated string", line);
      out.push_back({Token::Kind::kString, v});
      i = j + 1;
      continue;
    }
    static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                 "~", "<", ">", "(", ")", "[", "]", "{", "}", ",", ".", ":",
                                 "|", "="};
    bool matched = false;
    for (const char* op : kOps) {
      const size_t n = std::char_traits<char>::length(op);
      if (s.compare(i, n, op) == 0) {
        out.push_back({Token::Kind::kOp, op});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) {
      return InvalidArgumentError("chat_template:{}: unexpected character '{}'", line, c);
    }
  }
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

}  // namespace tandem::chat_template
