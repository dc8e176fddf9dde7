#include "runtime/core/json_parse.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <new>

#include <fmt/format.h>

namespace tandem {
namespace {

// Where `text` first nests deeper than `max_depth`: the byte offset of the bracket that
// opens level max_depth + 1, or npos. Brackets inside strings do not count. Exact for text
// nlohmann accepts; on malformed text it is an upper bound of what the parser would build,
// which is all the limit needs.
size_t FindTooDeep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      depth = std::max(depth - 1, 0);
    }
  }
  return std::string_view::npos;
}

size_t LineAt(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// Cuts `s` to at most `n` bytes without splitting a UTF-8 sequence.
void CutUtf8(std::string* s, size_t n) {
  if (s->size() <= n) return;
  s->resize(n);
  while (!s->empty() && (static_cast<unsigned char>(s->back()) & 0xC0) == 0x80) s->pop_back();
  if (!s->empty() && static_cast<unsigned char>(s->back()) >= 0xC0) s->pop_back();
}

// nlohmann's message, at most about `n` bytes, with every byte above 0x7F written as \xNN:
// the "last read" part quotes the input byte by byte and may end inside a UTF-8 sequence,
// and a message must stay valid UTF-8 wherever it goes (into JSON, which refuses it
// otherwise).
std::string Detail(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02X}", c);
  }
  return out;
}

template <typename Json>
Result<Json> Parse(std::string_view text, std::string_view what, int max_depth) {
  RETURN_IF_ERROR(CheckJsonDepth(text, what, max_depth));
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ...".
    std::string_view detail = e.what();
    if (const size_t p = detail.find("] "); p != std::string_view::npos) detail.remove_prefix(p + 2);
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;
    return InvalidArgumentError("{}: line {}, byte {}: malformed JSON: {}", what,
                                LineAt(text, at), e.byte, Detail(detail, 300));
  } catch (const std::bad_alloc&) {
    return InvalidArgumentError("{}: out of memory parsing {} bytes of JSON", what, text.size());
  } catch (const std::exception& e) {
    return InvalidArgumentError("{}: malformed JSON: {}", what, Detail(e.what(), 300));
  }
}

template <typename Json>
void Describe(const Json& v, size_t budget, std::string* out) {
  if (out->size() > budget) return;
  if (v.is_array() || v.is_object()) {
    const bool obj = v.is_object();
    out->push_back(obj ? '{' : '[');
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out->size() <= budget; ++it) {
      if (!first) out->push_back(',');
      first = false;
      if (obj) {
        Describe(Json(it.key()), budget, out);
        out->push_back(':');
      }
      Describe(*it, budget, out);
    }
    out->push_back(obj ? '}' : ']');
  } else if (v.is_string()) {
    std::string s = v.template get_ref<const typename Json::string_t&>().substr(0, budget + 1);
    out->append(Json(std::move(s)).dump(-1, ' ', false, Json::error_handler_t::replace));
  } else {
    out->append(v.dump());
  }
}

template <typename Json>
std::string DescribeImpl(const Json& v, size_t max_chars) {
  std::string out;
  Describe(v, max_chars, &out);
  if (out.size() <= max_chars) return out;
  CutUtf8(&out, max_chars);
  out += "...";
  if (v.is_array()) {
    out += " (an array of " + std::to_string(v.size()) + " elements)";
  } else if (v.is_object()) {
    out += " (an object of " + std::to_string(v.size()) + " keys)";
  } else if (v.is_string()) {
    out += " (a string of " + std::to_string(v.template get_ref<const std::string&>().size()) +
           " bytes)";
  }
  return out;
}

}  // namespace

Status CheckJsonDepth(std::string_view text, std::string_view what, int max_depth) {
  const size_t at = FindTooDeep(text, max_depth);
  if (at == std::string_view::npos) return Status::Ok();
  return InvalidArgumentError(
      "{}: line {}, byte {}: JSON nested deeper than {} levels (arrays and objects inside each "
      "other); no input tandem reads needs that depth, so the file is corrupt or hostile",
      what, LineAt(text, at), at + 1, max_depth);
}

Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what, int max_depth) {
  return Parse<nlohmann::json>(text, what, max_depth);
}

Result<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, std::string_view what,
                                                int max_depth) {
  return Parse<nlohmann::ordered_json>(text, what, max_depth);
}

Result<nlohmann::json> ReadJsonFile(const std::string& path, std::string_view what,
                                    size_t max_bytes) {
  const std::string_view name = what.empty() ? std::string_view(path) : what;
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot be opened", name);
  std::string text;
  char buf[1 << 16];
  while (in && text.size() <= max_bytes) {
    in.read(buf, sizeof(buf));
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return InvalidArgumentError("{}: cannot be read", name);
  if (text.size() > max_bytes)
    return InvalidArgumentError("{}: larger than the limit of {} bytes for a JSON file", name,
                                max_bytes);
  return ParseJson(text, name);
}

std::string DescribeJson(const nlohmann::json& v, size_t max_chars) {
  return DescribeImpl(v, max_chars);
}

std::string DescribeJson(const nlohmann::ordered_json& v, size_t max_chars) {
  return DescribeImpl(v, max_chars);
}

}  // namespace tandem
