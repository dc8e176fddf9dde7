// Expressions of the renderer (renderer.h).
#include <algorithm>
#include <cmath>

#include "data/chat_template/builtins.h"
#include "data/chat_template/limits.h"
#include "data/chat_template/renderer.h"

namespace tandem::chat_template {
namespace {

// Python's integer arithmetic on int64: a result that does not fit (Python would grow the
// integer) is an error rather than a wrapped value or, for INT64_MIN // -1, a SIGFPE.
Result<Value> IntOp(const std::string& op, int64_t a, int64_t b, int line) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(a, b, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(a, b, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(a, b, &r);
  else if (op == "//" || op == "%") {
    if (b == -1) {  // a // -1 = -a; a % -1 = 0
      if (op == "%") return Value::Int(0);
      overflow = __builtin_sub_overflow(int64_t{0}, a, &r);
    } else {
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      r = op == "//" ? q : a - q * b;
    }
  }
  if (overflow) {
    return Err(line, fmt::format("integer overflow: {} {} {} does not fit 64 bits", a, op, b));
  }
  return Value::Int(r);
}

// a ** b for b >= 0, exactly while it fits 64 bits.
Result<Value> IntPow(int64_t a, int64_t b, int line) {
  int64_t r = 1, base = a;
  for (int64_t e = b; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) {
      return Err(line, fmt::format("integer overflow: {} ** {} does not fit 64 bits", a, b));
    }
    if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
      return Err(line, fmt::format("integer overflow: {} ** {} does not fit 64 bits", a, b));
    }
  }
  return Value::Int(r);
}
}  // namespace

Result<CallArgs> Renderer::EvalArgs(const Expr& e) {
  CallArgs a;
  for (const auto& x : e.items) {
    ASSIGN_OR_RETURN(Value v, Eval(*x));
    a.positional.push_back(std::move(v));
  }
  for (const auto& [k, x] : e.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*x));
    a.keyword.emplace_back(k, std::move(v));
  }
  return a;
}

Result<Value> Renderer::Index(const Value& a, const Value& key, int line) {
  if (a.is_object()) {
    if (const Value* x = a.obj->Find(key.Str())) return *x;
    return Value::Undefined(key.Str());
  }
  if ((a.is_array() || a.is_string()) && key.kind == Value::Kind::kInt) {
    std::vector<std::string> cps;
    if (a.is_string()) cps = CodePoints(a.s);
    const int64_t n = a.is_array() ? int64_t(a.arr->size()) : int64_t(cps.size());
    const int64_t k = key.i < 0 ? key.i + n : key.i;
    if (k < 0 || k >= n) return Value::Undefined("index");
    return a.is_array() ? (*a.arr)[size_t(k)] : Value::Str(cps[size_t(k)]);
  }
  if (a.is_undefined()) return Err(line, fmt::format("'{}' is undefined", a.s));
  return Value::Undefined(key.Str());
}

Result<Value> Renderer::Slice(const Expr& e) {
  ASSIGN_OR_RETURN(Value a, Eval(*e.a));
  int64_t bounds[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int k = 0; k < 3; ++k) {
    if (!e.items[size_t(k)]) continue;
    ASSIGN_OR_RETURN(Value v, Eval(*e.items[size_t(k)]));
    if (v.is_none()) continue;
    if (v.kind != Value::Kind::kInt) return Err(e.line, "slice indices must be integers");
    bounds[k] = v.i;
    given[k] = true;
  }
  const int64_t step = bounds[2];
  if (step == 0) return Err(e.line, "slice step cannot be zero");
  Array src;
  std::vector<std::string> cps;
  if (a.is_array()) src = *a.arr;
  else if (a.is_string()) cps = CodePoints(a.s);
  else return Err(e.line, fmt::format("cannot slice a value of type {}", a.TypeName()));
  const int64_t n = a.is_array() ? int64_t(src.size()) : int64_t(cps.size());
  auto clamp = [&](int64_t x, bool is_given, int64_t dflt) {
    if (!is_given) return dflt;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(bounds[1], given[1], step > 0 ? n : -1);
  Array out;
  std::string s;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (a.is_array()) out.push_back(src[size_t(k)]);
    else s += cps[size_t(k)];
  }
  return a.is_array() ? Value::List(std::move(out)) : Value::Str(s);
}

Result<Value> Renderer::Binary(const Expr& e) {
  const std::string& op = e.name;
  ASSIGN_OR_RETURN(Value a, Eval(*e.a));
  if (op == "and") {
    if (!a.Truthy()) return a;
    return Eval(*e.b);
  }
  if (op == "or") {
    if (a.Truthy()) return a;
    return Eval(*e.b);
  }
  ASSIGN_OR_RETURN(Value b, Eval(*e.b));
  if (op == "==") return Value::Bool(a.Equals(b));
  if (op == "!=") return Value::Bool(!a.Equals(b));
  if (op == "in" || op == "not in") {
    CallArgs args;
    args.positional.push_back(b);
    ASSIGN_OR_RETURN(bool in, ApplyTest("in", a, args, e.line));
    return Value::Bool(op == "in" ? in : !in);
  }
  if (op == "~") return Value::Str(a.Str() + b.Str());
  if (a.is_undefined() || b.is_undefined()) {
    return Err(e.line, fmt::format("'{}' is undefined", a.is_undefined() ? a.s : b.s));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    if (!((a.is_number() && b.is_number()) || (a.is_string() && b.is_string()))) {
      return Err(e.line, fmt::format("cannot compare {} and {}", a.TypeName(), b.TypeName()));
    }
    const int c = a.is_string() ? a.s.compare(b.s)
                                : (a.number() < b.number() ? -1 : a.number() > b.number());
    const bool r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    return Value::Bool(r);
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value::Str(a.s + b.s);
  if (op == "+" && a.is_array() && b.is_array()) {
    Array out = *a.arr;
    out.insert(out.end(), b.arr->begin(), b.arr->end());
    return Value::List(std::move(out));
  }
  if (op == "*" && a.is_string() && b.kind == Value::Kind::kInt) {
    if (b.i <= 0 || a.s.empty()) return Value::Str("");
    if (b.i > int64_t(kMaxOutputBytes / a.s.size())) {
      return Err(e.line, fmt::format("a string of {} bytes * {} is longer than the {}-byte limit",
                                     a.s.size(), b.i, kMaxOutputBytes));
    }
    std::string out;
    out.reserve(a.s.size() * size_t(b.i));
    for (int64_t k = 0; k < b.i; ++k) out += a.s;
    return Value::Str(out);
  }
  const bool nums = (a.is_number() || a.kind == Value::Kind::kBool) &&
                    (b.is_number() || b.kind == Value::Kind::kBool);
  if (!nums) {
    return Err(e.line, fmt::format("unsupported operand types for {}: {} and {}", op,
                                   a.TypeName(), b.TypeName()));
  }
  const bool ints = a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat && !a.u64 &&
                    !b.u64;
  const int64_t ai = a.kind == Value::Kind::kBool ? a.b : a.i;
  const int64_t bi = b.kind == Value::Kind::kBool ? b.b : b.i;
  const double af = a.kind == Value::Kind::kBool ? a.b : a.number();
  const double bf = b.kind == Value::Kind::kBool ? b.b : b.number();
  if ((op == "/" || op == "//" || op == "%") && bf == 0) return Err(e.line, "division by zero");
  if (ints && (op == "+" || op == "-" || op == "*" || op == "//" || op == "%")) {
    return IntOp(op, ai, bi, e.line);
  }
  if (op == "+") return Value::Float(af + bf);
  if (op == "-") return Value::Float(af - bf);
  if (op == "*") return Value::Float(af * bf);
  if (op == "/") return Value::Float(af / bf);
  if (op == "//") return Value::Float(std::floor(af / bf));
  if (op == "%") return Value::Float(af - std::floor(af / bf) * bf);
  if (op == "**") {
    if (ints && bi >= 0) return IntPow(ai, bi, e.line);
    return Value::Float(std::pow(af, bf));
  }
  return Err(e.line, fmt::format("unsupported operator '{}'", op));
}

Result<Value> Renderer::Call(const Expr& e) {
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
  if (e.a->kind == Expr::Kind::kAttr) {
    ASSIGN_OR_RETURN(Value obj, Eval(*e.a->a));
    if (obj.is_object()) {
      const Value* f = obj.obj->Find(e.a->name);
      if (f && f->kind == Value::Kind::kFunction) return (*f->fn)(args);
    }
    if (obj.is_undefined()) return Err(e.line, fmt::format("'{}' is undefined", obj.s));
    return CallMethod(obj, e.a->name, args, e.line);
  }
  ASSIGN_OR_RETURN(Value f, Eval(*e.a));
  if (f.is_object() && f.obj->call) return (*f.obj->call)(args);
  if (f.kind != Value::Kind::kFunction) {
    return Err(e.line, fmt::format("'{}' is not callable",
                                   e.a->kind == Expr::Kind::kName ? e.a->name : f.Repr()));
  }
  auto r = (*f.fn)(args);
  if (!r.ok() && f.macro == nullptr) return Err(e.line, r.status().message());
  return r;
}

Result<Value> Renderer::Eval(const Expr& e) {
  ASSIGN_OR_RETURN(Value v, EvalNode(e));
  // Every string and list a template builds passes here, so none grows past the limits by
  // repeated concatenation; an operation that would build a much larger one in one step
  // (str * n, indent, range) checks its size before allocating.
  if (v.is_string() && v.s.size() > kMaxOutputBytes) {
    return Err(e.line, fmt::format("a string of {} bytes is longer than the {}-byte limit",
                                   v.s.size(), kMaxOutputBytes));
  }
  if (v.is_string()) evaluated_bytes_ += int64_t(v.s.size());
  if (v.is_array()) evaluated_bytes_ += int64_t(v.arr->size() * sizeof(Value));
  if (evaluated_bytes_ > kMaxEvaluatedBytes) {
    return Err(e.line, fmt::format("the rendering evaluated more than {} bytes of strings and "
                                   "lists (a string or list grown in a loop?)",
                                   kMaxEvaluatedBytes));
  }
  if ((v.is_array() || v.is_object()) && v.Nest() > kMaxValueDepth) {
    return Err(e.line, fmt::format("a value nested deeper than {} levels", kMaxValueDepth));
  }
  if (v.is_array() && int64_t(v.arr->size()) > kMaxListItems) {
    return Err(e.line, fmt::format("a list of {} items is longer than the limit of {}",
                                   v.arr->size(), kMaxListItems));
  }
  return v;
}

Result<Value> Renderer::EvalNode(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.value;
    case Expr::Kind::kName: return Lookup(e.name);
    case Expr::Kind::kList: {
      Array out;
      for (const auto& x : e.items) {
        ASSIGN_OR_RETURN(Value v, Eval(*x));
        out.push_back(std::move(v));
      }
      Value list = Value::List(std::move(out));
      list.tuple = e.name == "tuple";
      return list;
    }
    case Expr::Kind::kDict: {
      Value d = Value::Dict();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        ASSIGN_OR_RETURN(Value key, Eval(*e.items[k]));
        ASSIGN_OR_RETURN(Value v, Eval(*e.items[k + 1]));
        d.obj->Set(key.Str(), std::move(v));
      }
      return d;
    }
    case Expr::Kind::kAttr: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      if (a.is_undefined()) {
        return Err(e.line, fmt::format("'{}' is undefined (reading .{})", a.s, e.name));
      }
      if (a.is_object()) {
        if (const Value* x = a.obj->Find(e.name)) return *x;
      }
      return Value::Undefined(e.name);
    }
    case Expr::Kind::kIndex: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      ASSIGN_OR_RETURN(Value k, Eval(*e.b));
      return Index(a, k, e.line);
    }
    case Expr::Kind::kSlice: return Slice(e);
    case Expr::Kind::kCall: return Call(e);
    case Expr::Kind::kFilter: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      return ApplyFilter(e.name, a, args, e.line);
    }
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, a, args, e.line));
      return Value::Bool(e.negated ? !r : r);
    }
    case Expr::Kind::kUnary: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.a));
      if (e.name == "not") return Value::Bool(!a.Truthy());
      if (a.kind == Value::Kind::kInt && a.u64) {
        return e.name == "-" ? Value::Float(-a.number()) : a;
      }
      if (a.kind == Value::Kind::kInt) {
        return e.name == "-" ? IntOp("-", 0, a.i, e.line) : Result<Value>(a);
      }
      if (a.kind == Value::Kind::kFloat) return Value::Float(e.name == "-" ? -a.f : a.f);
      return Err(e.line, fmt::format("bad operand type for unary {}: {}", e.name, a.TypeName()));
    }
    case Expr::Kind::kBinary: return Binary(e);
    case Expr::Kind::kTernary: {
      ASSIGN_OR_RETURN(Value c, Eval(*e.a));
      return Eval(*e.items[c.Truthy() ? 0 : 1]);
    }
  }
  return Err(e.line, "unknown expression");
}

}  // namespace tandem::chat_template
