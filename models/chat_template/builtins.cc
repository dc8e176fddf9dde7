#include "models/chat_template/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace tandem::chat_template {
namespace {

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

}  // namespace

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

Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args, int line) {
  const Value* arg = args.Get(0, "value");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Value::Kind::kBool;
  if (name == "true") return v.kind == Value::Kind::kBool && v.b;
  if (name == "false") return v.kind == Value::Kind::kBool && !v.b;
  if (name == "integer") return v.kind == Value::Kind::kInt;
  if (name == "float") return v.kind == Value::Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "sequence" || name == "iterable") {
    return v.is_array() || v.is_string() || v.is_object();
  }
  if (name == "callable") return v.kind == Value::Kind::kFunction;
  if (name == "lower") return v.is_string() && Upper(v.s, false) == v.s;
  if (name == "upper") return v.is_string() && Upper(v.s, true) == v.s;
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind != Value::Kind::kInt) return Err(line, "test '" + name + "' needs an integer");
    if (name == "odd") return v.i % 2 != 0;
    if (name == "even") return v.i % 2 == 0;
    if (!arg || arg->kind != Value::Kind::kInt || arg->i == 0) {
      return Err(line, "divisibleby needs a non-zero integer");
    }
    return v.i % arg->i == 0;
  }
  if (!arg) return Err(line, fmt::format("unknown test '{}' or missing argument", name));
  if (name == "eq" || name == "equalto" || name == "==") return v.Equals(*arg);
  if (name == "ne" || name == "!=") return !v.Equals(*arg);
  if (name == "sameas") return v.Equals(*arg) && v.kind == arg->kind;
  if (name == "lt" || name == "<") return Less(v, *arg);
  if (name == "gt" || name == ">") return Less(*arg, v);
  if (name == "le" || name == "<=") return !Less(*arg, v);
  if (name == "ge" || name == ">=") return !Less(v, *arg);
  if (name == "in") {
    if (arg->is_string() && v.is_string()) return arg->s.find(v.s) != std::string::npos;
    ASSIGN_OR_RETURN(Array xs, Items(*arg, line));
    for (const auto& x : xs) {
      if (x.Equals(v)) return true;
    }
    return false;
  }
  return Err(line, fmt::format("unknown test '{}'", name));
}

namespace {

// Filters over lists: indent, max/min/sum, wordcount; the last of the chain, so an unknown
// name is the error.
Result<Value> OtherFilter(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (name == "indent") {
    const Value* w = args.Get(0, "width");
    const Value* first = args.Get(1, "first");
    const std::string pad(size_t(w && w->kind == Value::Kind::kInt ? w->i : 4), ' ');
    std::string s = v.Str(), out;
    bool at_start = true;
    for (size_t k = 0; k < s.size(); ++k) {
      if (at_start && (k > 0 || (first && first->Truthy())) && s[k] != '\n') out += pad;
      out += s[k];
      at_start = s[k] == '\n';
    }
    return Value::Str(out);
  }
  if (name == "max" || name == "min" || name == "sum") {
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    if (name == "sum") {
      Value acc = Value::Int(0);
      for (const auto& x : xs) {
        acc = acc.kind == Value::Kind::kInt && x.kind == Value::Kind::kInt
                  ? Value::Int(acc.i + x.i) : Value::Float(acc.number() + x.number());
      }
      return acc;
    }
    if (xs.empty()) return Value::Undefined();
    Value best = xs[0];
    for (const auto& x : xs) {
      if (name == "max" ? Less(best, x) : Less(x, best)) best = x;
    }
    return best;
  }
  if (name == "wordcount") return Value::Int(int64_t(Split(v.Str(), nullptr, -1).size()));
  return Err(line, fmt::format("unsupported filter '{}'", name));
}


// unique, sort, map, select/reject(attr).
Result<Value> SelectFilter(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (name == "unique" || name == "sort") {
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    const Value* attr = StrArg(args, name == "sort" ? 2 : 1, "attribute");
    auto key = [&](const Value& x) { return attr ? Attribute(x, attr->s) : x; };
    if (name == "sort") {
      std::stable_sort(xs.begin(), xs.end(),
                       [&](const Value& a, const Value& b) { return Less(key(a), key(b)); });
      const Value* rev = args.Get(0, "reverse");
      if (rev && rev->Truthy()) std::reverse(xs.begin(), xs.end());
      return Value::List(std::move(xs));
    }
    Array out;
    for (const auto& x : xs) {
      bool seen = false;
      for (const auto& y : out) seen = seen || key(y).Equals(key(x));
      if (!seen) out.push_back(x);
    }
    return Value::List(std::move(out));
  }
  if (name == "map") {
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    Array out;
    const Value* attr = nullptr;
    for (const auto& [k, x] : args.keyword) {
      if (k == "attribute") attr = &x;
    }
    if (attr) {
      for (const auto& x : xs) out.push_back(Attribute(x, attr->Str()));
      return Value::List(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return Err(line, "map needs a filter name or attribute=");
    }
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    for (const auto& x : xs) {
      ASSIGN_OR_RETURN(Value y, ApplyFilter(args.positional[0].s, x, rest, line));
      out.push_back(std::move(y));
    }
    return Value::List(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    const bool by_attr = name.size() > 6;
    const bool keep_if = name[0] == 's';
    size_t k0 = 0;
    std::string attr;
    if (by_attr) {
      if (args.positional.empty()) return Err(line, name + " needs an attribute name");
      attr = args.positional[0].Str();
      k0 = 1;
    }
    CallArgs rest;
    if (args.positional.size() > k0 + 1) {
      rest.positional.assign(args.positional.begin() + long(k0) + 1, args.positional.end());
    }
    Array out;
    for (const auto& x : xs) {
      const Value item = by_attr ? Attribute(x, attr) : x;
      bool pass = item.Truthy();
      if (args.positional.size() > k0) {
        ASSIGN_OR_RETURN(pass, ApplyTest(args.positional[k0].Str(), item, rest, line));
      }
      if (pass == keep_if) out.push_back(x);
    }
    return Value::List(std::move(out));
  }
  return OtherFilter(name, v, args, line);
}

// join, first/last, list, reverse, items.
Result<Value> ListFilter(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (name == "join") {
    const Value* sep = StrArg(args, 0, "d");
    const Value* attr = StrArg(args, 1, "attribute");
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    std::string out;
    for (size_t k = 0; k < xs.size(); ++k) {
      if (k && sep) out += sep->s;
      out += (attr ? Attribute(xs[k], attr->s) : xs[k]).Str();
    }
    return Value::Str(out);
  }
  if (name == "first" || name == "last") {
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    if (xs.empty()) return Value::Undefined();
    return name == "first" ? xs.front() : xs.back();
  }
  if (name == "list") {
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    return Value::List(std::move(xs));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = CodePoints(v.s);
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::Str(out);
    }
    ASSIGN_OR_RETURN(Array xs, Items(v, line));
    std::reverse(xs.begin(), xs.end());
    return Value::List(std::move(xs));
  }
  if (name == "items") {
    if (!v.is_object()) return Err(line, "items needs a dict");
    Array out;
    for (const auto& [k, x] : v.obj->items) out.push_back(Value::List({Value::Str(k), x}));
    return Value::List(std::move(out));
  }
  return SelectFilter(name, v, args, line);
}

}  // namespace

Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (name == "default" || name == "d") {
    const Value* dflt = args.Get(0, "default_value");
    const Value* boolean = args.Get(1, "boolean");
    const bool use = v.is_undefined() || (boolean && boolean->Truthy() && !v.Truthy());
    return use ? (dflt ? *dflt : Value::Str("")) : v;
  }
  if (v.is_undefined() && name != "string" && name != "length" && name != "count" &&
      name != "list" && name != "tojson") {
    return Err(line, fmt::format("filter '{}' applied to undefined '{}'", name, v.s));
  }
  if (name == "trim") {
    if (!v.is_string()) return Err(line, "trim needs a string");
    const Value* chars = StrArg(args, 0, "chars");
    return Value::Str(Strip(v.s, chars ? &chars->s : nullptr, true, true));
  }
  if (name == "tojson") {
    const Value* indent = args.Get(0, "indent");
    const Value* sort = args.Get(1, "sort_keys");
    auto s = v.ToJson(indent && indent->kind == Value::Kind::kInt ? int(indent->i) : -1,
                      sort && sort->Truthy());
    if (!s.ok()) return Err(line, s.status().message());
    return Value::Str(*s);
  }
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::Int(0);
    ASSIGN_OR_RETURN(int64_t n, Length(v, line));
    return Value::Int(n);
  }
  if (name == "string") return Value::Str(v.Str());
  if (name == "upper" || name == "lower") return Value::Str(Upper(v.Str(), name == "upper"));
  if (name == "title") return Value::Str(Title(v.Str()));
  if (name == "capitalize") {
    std::string s = Upper(v.Str(), false);
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value::Str(s);
  }
  if (name == "replace") {
    const Value* a = StrArg(args, 0, "old");
    const Value* b = StrArg(args, 1, "new");
    const Value* n = args.Get(2, "count");
    if (!a || !b) return Err(line, "replace needs two strings");
    return Value::Str(Replace(v.Str(), a->s, b->s, n && n->kind == Value::Kind::kInt ? n->i : -1));
  }
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    if (name == "safe") return v;
    std::string out;
    for (char c : v.Str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::Str(out);
  }
  if (name == "int") {
    if (v.kind == Value::Kind::kInt) return v;
    if (v.kind == Value::Kind::kFloat) return Value::Int(int64_t(v.f));
    if (v.kind == Value::Kind::kBool) return Value::Int(v.b);
    if (v.is_string()) return Value::Int(std::strtoll(Strip(v.s, nullptr, true, true).c_str(), nullptr, 10));
    return Value::Int(0);
  }
  if (name == "float") {
    if (v.is_number()) return Value::Float(v.number());
    if (v.is_string()) return Value::Float(std::strtod(v.s.c_str(), nullptr));
    return Value::Float(0);
  }
  if (name == "abs") {
    if (v.kind == Value::Kind::kInt) return Value::Int(v.i < 0 ? -v.i : v.i);
    return Value::Float(std::fabs(v.number()));
  }
  return ListFilter(name, v, args, line);
}

Result<Value> CallMethod(const Value& obj, const std::string& name, CallArgs& args, int line) {
  if (obj.is_string()) {
    const std::string& s = obj.s;
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const Value* c = StrArg(args, 0, "chars");
      return Value::Str(Strip(s, c ? &c->s : nullptr, name != "rstrip", name != "lstrip"));
    }
    if (name == "startswith" || name == "endswith") {
      const Value* a = args.Get(0, "prefix");
      if (!a) return Err(line, name + " needs an argument");
      Array cands = a->is_array() ? *a->arr : Array{*a};
      for (const auto& c : cands) {
        if (!c.is_string()) return Err(line, name + " needs strings");
        const bool hit = name == "startswith"
                             ? s.compare(0, c.s.size(), c.s) == 0
                             : s.size() >= c.s.size() &&
                                   s.compare(s.size() - c.s.size(), c.s.size(), c.s) == 0;
        if (hit) return Value::Bool(true);
      }
      return Value::Bool(false);
    }
    if (name == "split") {
      const Value* sep = args.Get(0, "sep");
      const Value* n = args.Get(1, "maxsplit");
      if (sep && sep->is_string() && sep->s.empty()) return Err(line, "empty separator");
      Array out;
      for (auto& p : Split(s, sep, n && n->kind == Value::Kind::kInt ? n->i : -1)) {
        out.push_back(Value::Str(p));
      }
      return Value::List(std::move(out));
    }
    if (name == "upper" || name == "lower") return Value::Str(Upper(s, name == "upper"));
    if (name == "title" || name == "capitalize") return ApplyFilter(name, obj, args, line);
    if (name == "replace") return ApplyFilter("replace", obj, args, line);
    if (name == "find" || name == "count") {
      const Value* a = StrArg(args, 0, "sub");
      if (!a) return Err(line, name + " needs a string");
      if (name == "find") {
        const size_t at = s.find(a->s);
        return Value::Int(at == std::string::npos ? -1 : int64_t(CodePoints(s.substr(0, at)).size()));
      }
      int64_t n = 0;
      for (size_t at = s.find(a->s); !a->s.empty() && at != std::string::npos;
           at = s.find(a->s, at + a->s.size())) {
        ++n;
      }
      return Value::Int(n);
    }
    if (name == "join") {
      const Value* xs = args.Get(0, "iterable");
      if (!xs) return Err(line, "join needs an iterable");
      CallArgs a;
      a.positional.push_back(obj);
      return ApplyFilter("join", *xs, a, line);
    }
    if (name == "isdigit" || name == "isspace" || name == "isalpha") {
      bool all = !s.empty();
      for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        all = all && (name == "isdigit" ? std::isdigit(u) : name == "isspace" ? std::isspace(u)
                                                                               : std::isalpha(u));
      }
      return Value::Bool(all);
    }
  }
  if (obj.is_object()) {
    if (name == "items") return ApplyFilter("items", obj, args, line);
    if (name == "keys" || name == "values") {
      Array out;
      for (const auto& [k, x] : obj.obj->items) out.push_back(name == "keys" ? Value::Str(k) : x);
      return Value::List(std::move(out));
    }
    if (name == "get") {
      const Value* k = args.Get(0, "key");
      const Value* d = args.Get(1, "default");
      if (!k) return Err(line, "get needs a key");
      if (const Value* x = obj.obj->Find(k->Str())) return *x;
      return d ? *d : Value::None();
    }
  }
  if (obj.is_array() && (name == "index" || name == "count")) {
    const Value* x = args.Get(0, "value");
    if (!x) return Err(line, name + " needs a value");
    int64_t n = 0;
    for (size_t k = 0; k < obj.arr->size(); ++k) {
      if ((*obj.arr)[k].Equals(*x)) {
        if (name == "index") return Value::Int(int64_t(k));
        ++n;
      }
    }
    if (name == "index") return Err(line, "list.index: value not in list");
    return Value::Int(n);
  }
  return Err(line, fmt::format("unsupported method '{}' on a value of type {}", name,
                               obj.TypeName()));
}

Value Global(const std::string& name) {
  if (name == "range") {
    return Value::Fn([](CallArgs& a) -> Result<Value> {
      int64_t start = 0, stop = 0, step = 1;
      auto num = [&](size_t k) { return a.positional[k].kind == Value::Kind::kInt ? a.positional[k].i : 0; };
      if (a.positional.size() == 1) stop = num(0);
      else if (a.positional.size() >= 2) start = num(0), stop = num(1);
      if (a.positional.size() >= 3) step = num(2);
      if (step == 0) return InvalidArgumentError("range() step must not be zero");
      Array out;
      for (int64_t x = start; step > 0 ? x < stop : x > stop; x += step) out.push_back(Value::Int(x));
      return Value::List(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    const bool ns = name == "namespace";
    return Value::Fn([ns](CallArgs& a) -> Result<Value> {
      Value d = Value::Dict();
      d.obj->is_namespace = ns;
      for (const auto& p : a.positional) {
        if (p.is_object()) {
          for (const auto& [k, v] : p.obj->items) d.obj->Set(k, v);
        }
      }
      for (const auto& [k, v] : a.keyword) d.obj->Set(k, v);
      return d;
    });
  }
  if (name == "raise_exception") {
    return Value::Fn([](CallArgs& a) -> Result<Value> {
      return InvalidArgumentError("the chat template raised: {}",
                                  a.positional.empty() ? "" : a.positional[0].Str());
    });
  }
  if (name == "strftime_now") {
    return Value::Fn([](CallArgs& a) -> Result<Value> {
      const std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      const std::string f = a.positional.empty() ? "%Y-%m-%d" : a.positional[0].Str();
      const size_t n = std::strftime(buf, sizeof(buf), f.c_str(), &tm);
      return Value::Str(std::string(buf, n));
    });
  }
  return Value::Undefined(name);
}

}  // namespace tandem::chat_template
