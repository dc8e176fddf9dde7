#include "tools/terminal_text.h"

#include <fmt/format.h>

namespace tandem::cli {
namespace {

std::string Escape(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c == '\n' || c == '\t') && keep_lines) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string EscapeControl(std::string_view s) { return Escape(s, /*keep_lines=*/false); }

std::string EscapeControlKeepLines(std::string_view s) { return Escape(s, /*keep_lines=*/true); }

}  // namespace tandem::cli
