#include "data/chat_template/builtins_util.h"

#include <algorithm>

#include "data/chat_template/builtins.h"

namespace tandem::chat_template {

Status Err(int line, const std::string& what) {
  return InvalidArgumentError("chat_template:{}: {}", line, what);
}

bool IsPySpace(const std::string& cp) {
  if (cp.size() == 1) {
    const char c = cp[0];
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
  }
  static const char* kSpaces[] = {"\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\xA8",
                                  "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  for (const char* s : kSpaces) {
    if (cp == s) return true;
  }
  // U+2000..U+200A
  return cp.size() == 3 && cp[0] == '\xE2' && cp[1] == '\x80' &&
         static_cast<uint8_t>(cp[2]) >= 0x80 && static_cast<uint8_t>(cp[2]) <= 0x8A;
}

std::vector<std::string> Split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none()) {
    auto cps = CodePoints(s);
    std::string cur;
    bool in_word = false;
    for (size_t k = 0; k < cps.size(); ++k) {
      if (IsPySpace(cps[k])) {
        if (in_word) {
          out.push_back(cur);
          cur.clear();
          in_word = false;
        }
        if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit && !out.empty()) {
          std::string rest;
          size_t j = k;
          while (j < cps.size() && IsPySpace(cps[j])) ++j;
          for (; j < cps.size(); ++j) rest += cps[j];
          if (!rest.empty()) out.push_back(rest);
          return out;
        }
      } else {
        cur += cps[k];
        in_word = true;
      }
    }
    if (in_word) out.push_back(cur);
    return out;
  }
  const std::string& d = sep->s;
  size_t pos = 0;
  while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
    const size_t at = s.find(d, pos);
    if (at == std::string::npos) break;
    out.push_back(s.substr(pos, at - pos));
    pos = at + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

std::string Upper(std::string s, bool up) {
  for (char& c : s) c = static_cast<char>(up ? std::toupper(static_cast<unsigned char>(c))
                                             : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Title(const std::string& s) {
  std::string out = s;
  bool prev_alpha = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha) c = static_cast<char>(prev_alpha ? std::tolower(c) : std::toupper(c));
    prev_alpha = alpha;
  }
  return out;
}

std::string Replace(const std::string& s, const std::string& a, const std::string& b,
                    int64_t count) {
  if (a.empty()) return s;
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(a, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + b;
    pos = at + a.size();
    ++n;
  }
  return out + s.substr(pos);
}

Result<int64_t> Length(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::kString: return int64_t(CodePoints(v.s).size());
    case Value::Kind::kArray: return int64_t(v.arr->size());
    case Value::Kind::kObject: return int64_t(v.obj->items.size());
    default: return Err(line, fmt::format("object of type {} has no length", v.TypeName()));
  }
}

Result<Array> Items(const Value& v, int line) {
  if (v.is_array()) return *v.arr;
  if (v.is_string()) {
    Array a;
    for (auto& c : CodePoints(v.s)) a.push_back(Value::Str(c));
    return a;
  }
  if (v.is_object()) {
    Array a;
    for (const auto& [k, x] : v.obj->items) a.push_back(Value::Str(k));
    return a;
  }
  if (v.is_undefined() || v.is_none()) {
    if (v.is_undefined()) return Array{};
  }
  return Err(line, fmt::format("a value of type {} is not iterable", v.TypeName()));
}

Value Attribute(const Value& v, const std::string& name) {
  if (v.is_object()) {
    if (const Value* x = v.obj->Find(name)) return *x;
  }
  return Value::Undefined(name);
}

const Value* StrArg(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.Get(i, name);
  return v && v->is_string() ? v : nullptr;
}

bool Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() < b.number();
  if (a.is_string() && b.is_string()) return a.s < b.s;
  return a.kind < b.kind;
}

std::string Strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto cps = CodePoints(s);
  std::vector<std::string> set;
  if (chars) set = CodePoints(*chars);
  auto strip_it = [&](const std::string& cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : IsPySpace(cp);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

}  // namespace tandem::chat_template
