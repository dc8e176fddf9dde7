// Jinja tests (ApplyTest), str/list/dict methods (CallMethod) and globals (Global).
#include <algorithm>
#include <cmath>
#include <ctime>

#include "data/chat_template/builtins.h"
#include "data/chat_template/builtins_util.h"
#include "data/chat_template/limits.h"

namespace tandem::chat_template {

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
    return arg->i == -1 || v.i % arg->i == 0;  // INT64_MIN % -1 traps
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
      for (const Value& x : a.positional) {
        if (x.kind != Value::Kind::kInt) {  // Python's TypeError; a float no longer reads as 0
          return InvalidArgumentError("range() needs integers, got {}", x.TypeName());
        }
      }
      auto num = [&](size_t k) { return a.positional[k].i; };
      if (a.positional.size() == 1) stop = num(0);
      else if (a.positional.size() >= 2) start = num(0), stop = num(1);
      if (a.positional.size() >= 3) step = num(2);
      if (step == 0) return InvalidArgumentError("range() step must not be zero");
      // The length first (in 128 bits: stop - start may overflow int64), then the items.
      const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
      const __int128 mag = step > 0 ? __int128(step) : -__int128(step);
      const __int128 count = span <= 0 ? 0 : (span + mag - 1) / mag;
      if (count > kMaxListItems) {
        return InvalidArgumentError("range() of {} items is longer than the limit of {}",
                                    int64_t(std::min<__int128>(count, INT64_MAX)), kMaxListItems);
      }
      Array out;
      out.reserve(size_t(count));
      for (int64_t k = 0; k < int64_t(count); ++k) out.push_back(Value::Int(start + k * step));
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
