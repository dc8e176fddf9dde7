// The tree-walking renderer behind ChatTemplate::Render.
#include <cmath>
#include <map>

#include "models/chat_template/ast.h"
#include "models/chat_template/builtins.h"
#include "models/chat_template/chat_template.h"
#include "models/chat_template/parser.h"

namespace tandem::chat_template {
namespace {

Status Err(int line, const std::string& what) {
  return InvalidArgumentError("chat_template:{}: {}", line, what);
}

enum class Flow { kNormal, kBreak, kContinue };

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

class Renderer {
 public:
  explicit Renderer(std::string* out) : out_(out) { scopes_.emplace_back(); }

  void Define(const std::string& k, Value v) { scopes_.front()[k] = std::move(v); }

  Result<Flow> Run(const Body& body) {
    for (const auto& st : body) {
      ASSIGN_OR_RETURN(Flow f, Exec(*st));
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Global(name);
  }

  Result<Flow> Exec(const Stmt& st) {
    switch (st.kind) {
      case Stmt::Kind::kText: *out_ += st.text; return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        ASSIGN_OR_RETURN(Value v, Eval(*st.expr));
        *out_ += v.Str();
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : st.branches) {
          ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (c.Truthy()) return Run(body);
        }
        return Run(st.else_body);
      case Stmt::Kind::kFor: return ExecFor(st);
      case Stmt::Kind::kSet: return ExecSet(st);
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kBlock: return Run(st.body);
    }
    return Flow::kNormal;
  }

  Status Assign(const std::vector<std::string>& targets, const Value& v, int line,
                std::map<std::string, Value>* scope) {
    if (targets.size() == 1) {
      (*scope)[targets[0]] = v;
      return Status::Ok();
    }
    if (!v.is_array() || v.arr->size() != targets.size()) {
      return Err(line, fmt::format("cannot unpack {} into {} names", v.Repr(), targets.size()));
    }
    for (size_t k = 0; k < targets.size(); ++k) (*scope)[targets[k]] = (*v.arr)[k];
    return Status::Ok();
  }

  Result<Flow> ExecSet(const Stmt& st) {
    Value v;
    if (st.expr) {
      ASSIGN_OR_RETURN(v, Eval(*st.expr));
    } else {
      std::string captured;
      std::string* saved = out_;
      out_ = &captured;
      auto r = Run(st.body);
      out_ = saved;
      if (!r.ok()) return r.status();
      v = Value::Str(captured);
    }
    if (!st.attr.empty()) {
      Value ns = Lookup(st.targets[0]);
      if (!ns.is_object() || !ns.obj->is_namespace) {
        return Err(st.line, fmt::format("cannot set '{}.{}': '{}' is not a namespace",
                                        st.targets[0], st.attr, st.targets[0]));
      }
      ns.obj->Set(st.attr, std::move(v));
      return Flow::kNormal;
    }
    RETURN_IF_ERROR(Assign(st.targets, v, st.line, &scopes_.back()));
    return Flow::kNormal;
  }

  Result<Flow> ExecFor(const Stmt& st) {
    ASSIGN_OR_RETURN(Value seq, Eval(*st.expr));
    Array items;
    if (seq.is_array()) {
      items = *seq.arr;
    } else if (seq.is_object()) {
      for (const auto& [k, x] : seq.obj->items) items.push_back(Value::Str(k));
    } else if (seq.is_string()) {
      for (auto& c : CodePoints(seq.s)) items.push_back(Value::Str(c));
    } else if (!seq.is_undefined()) {
      return Err(st.line, fmt::format("cannot loop over a value of type {}", seq.TypeName()));
    }
    if (st.cond) {  // the filter runs before the loop, so loop.* counts the kept items
      Array kept;
      for (const auto& x : items) {
        scopes_.emplace_back();
        Status s = Assign(st.targets, x, st.line, &scopes_.back());
        auto c = s.ok() ? Eval(*st.cond) : Result<Value>(s);
        scopes_.pop_back();
        if (!c.ok()) return c.status();
        if (c->Truthy()) kept.push_back(x);
      }
      items.swap(kept);
    }
    if (items.empty()) return Run(st.else_body);
    const int64_t n = int64_t(items.size());
    for (int64_t k = 0; k < n; ++k) {
      scopes_.emplace_back();
      Value loop = Value::Dict();
      auto& o = *loop.obj;
      o.Set("index", Value::Int(k + 1));
      o.Set("index0", Value::Int(k));
      o.Set("revindex", Value::Int(n - k));
      o.Set("revindex0", Value::Int(n - k - 1));
      o.Set("first", Value::Bool(k == 0));
      o.Set("last", Value::Bool(k == n - 1));
      o.Set("length", Value::Int(n));
      o.Set("previtem", k > 0 ? items[size_t(k - 1)] : Value::Undefined("previtem"));
      o.Set("nextitem", k + 1 < n ? items[size_t(k + 1)] : Value::Undefined("nextitem"));
      scopes_.back()["loop"] = loop;
      Status s = Assign(st.targets, items[size_t(k)], st.line, &scopes_.back());
      auto f = s.ok() ? Run(st.body) : Result<Flow>(s);
      scopes_.pop_back();
      if (!f.ok()) return f.status();
      if (*f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Result<CallArgs> EvalArgs(const Expr& e) {
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

  Result<Value> Index(const Value& a, const Value& key, int line) {
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

  Result<Value> Slice(const Expr& e) {
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

  Result<Value> Binary(const Expr& e) {
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
      std::string out;
      for (int64_t k = 0; k < b.i; ++k) out += a.s;
      return Value::Str(out);
    }
    const bool nums = (a.is_number() || a.kind == Value::Kind::kBool) &&
                      (b.is_number() || b.kind == Value::Kind::kBool);
    if (!nums) {
      return Err(e.line, fmt::format("unsupported operand types for {}: {} and {}", op,
                                     a.TypeName(), b.TypeName()));
    }
    const bool ints = a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat;
    const int64_t ai = a.kind == Value::Kind::kBool ? a.b : a.i;
    const int64_t bi = b.kind == Value::Kind::kBool ? b.b : b.i;
    const double af = a.kind == Value::Kind::kBool ? a.b : a.number();
    const double bf = b.kind == Value::Kind::kBool ? b.b : b.number();
    if (op == "+") return ints ? Value::Int(ai + bi) : Value::Float(af + bf);
    if (op == "-") return ints ? Value::Int(ai - bi) : Value::Float(af - bf);
    if (op == "*") return ints ? Value::Int(ai * bi) : Value::Float(af * bf);
    if ((op == "/" || op == "//" || op == "%") && bf == 0) return Err(e.line, "division by zero");
    if (op == "/") return Value::Float(af / bf);
    if (op == "//") return ints ? Value::Int(FloorDiv(ai, bi)) : Value::Float(std::floor(af / bf));
    if (op == "%") {
      if (ints) return Value::Int(ai - FloorDiv(ai, bi) * bi);
      return Value::Float(af - std::floor(af / bf) * bf);
    }
    if (op == "**") {
      if (ints && bi >= 0) return Value::Int(int64_t(std::llround(std::pow(af, bf))));
      return Value::Float(std::pow(af, bf));
    }
    return Err(e.line, fmt::format("unsupported operator '{}'", op));
  }

  Result<Value> Call(const Expr& e) {
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
    if (f.kind != Value::Kind::kFunction) {
      return Err(e.line, fmt::format("'{}' is not callable",
                                     e.a->kind == Expr::Kind::kName ? e.a->name : f.Repr()));
    }
    auto r = (*f.fn)(args);
    if (!r.ok()) return Err(e.line, r.status().message());
    return r;
  }

  Result<Value> Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return Lookup(e.name);
      case Expr::Kind::kList: {
        Array out;
        for (const auto& x : e.items) {
          ASSIGN_OR_RETURN(Value v, Eval(*x));
          out.push_back(std::move(v));
        }
        return Value::List(std::move(out));
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
        if (a.kind == Value::Kind::kInt) return Value::Int(e.name == "-" ? -a.i : a.i);
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

  std::string* out_;
  std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

Result<ChatTemplate> ChatTemplate::Parse(const std::string& source) {
  ASSIGN_OR_RETURN(Body body, ParseTemplate(source));
  ChatTemplate t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  std::string out;
  Renderer r(&out);
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      r.Define(it.key(), Value::FromJson(it.value()));
    }
  }
  auto f = r.Run(*body_);
  if (!f.ok()) return f.status();
  return out;
}

}  // namespace tandem::chat_template
