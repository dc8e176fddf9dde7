// Jinja filters (ApplyFilter): string, list, selection and JSON filters.
#include <algorithm>
#include <cmath>

#include "data/chat_template/builtins.h"
#include "data/chat_template/builtins_util.h"
#include "data/chat_template/limits.h"

namespace tandem::chat_template {

namespace {

// Filters over lists: indent, max/min/sum, wordcount; the last of the chain, so an unknown
// name is the error.
Result<Value> OtherFilter(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (name == "indent") {
    const Value* w = args.Get(0, "width");
    const Value* first = args.Get(1, "first");
    // Python's ' ' * width: a negative width indents by nothing.
    const int64_t width = std::max<int64_t>(0, w && w->kind == Value::Kind::kInt ? w->i : 4);
    std::string s = v.Str(), out;
    const int64_t lines = 1 + std::count(s.begin(), s.end(), '\n');
    if (width > 0 && (width > int64_t(kMaxOutputBytes) / lines ||
                      size_t(width * lines) > kMaxOutputBytes - s.size())) {
      return Err(line, fmt::format("indent({}) of {} lines is longer than the {}-byte limit",
                                   width, lines, kMaxOutputBytes));
    }
    const std::string pad(size_t(width), ' ');
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
        int64_t r = 0;
        if (acc.kind == Value::Kind::kInt && x.kind == Value::Kind::kInt && !acc.u64 && !x.u64) {
          if (__builtin_add_overflow(acc.i, x.i, &r)) {
            return Err(line, "integer overflow in sum: the total does not fit 64 bits");
          }
          acc = Value::Int(r);
        } else {
          acc = Value::Float(acc.number() + x.number());
        }
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
    // Each level's newline carries indent * depth spaces: a wider indent is a size bomb.
    if (indent && indent->kind == Value::Kind::kInt && indent->i > 1024) {
      return Err(line, fmt::format("tojson indent {} is wider than 1024", indent->i));
    }
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
    if (v.kind == Value::Kind::kFloat) {
      // Converting a double outside int64 (or NaN) is undefined behaviour in C++.
      if (!(std::fabs(v.f) < 9223372036854775808.0)) {
        return Err(line, fmt::format("int() of {} does not fit 64 bits", v.Repr()));
      }
      return Value::Int(int64_t(v.f));
    }
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
    if (v.kind == Value::Kind::kInt && (v.u64 || v.i >= 0)) return v;
    if (v.kind == Value::Kind::kInt) {
      if (v.i == INT64_MIN) return Err(line, "integer overflow: abs(-9223372036854775808)");
      return Value::Int(-v.i);
    }
    return Value::Float(std::fabs(v.number()));
  }
  return ListFilter(name, v, args, line);
}

}  // namespace tandem::chat_template
