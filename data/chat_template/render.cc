#include <algorithm>
#include <utility>

#include "data/chat_template/builtins.h"
#include "data/chat_template/chat_template.h"
#include "data/chat_template/limits.h"
#include "data/chat_template/parser.h"
#include "data/chat_template/renderer.h"

namespace tandem::chat_template {

Result<Flow> Renderer::Run(const Body& body) {
  for (const auto& st : body) {
    ASSIGN_OR_RETURN(Flow f, Exec(*st));
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Value Renderer::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return f->second;
  }
  return Global(name);
}

Status Renderer::CheckOutput(int line) const {
  if (out_->size() <= kMaxOutputBytes) return Status::Ok();
  return Err(line, fmt::format("the output is longer than the {}-byte limit", kMaxOutputBytes));
}

Result<Flow> Renderer::Exec(const Stmt& st) {
  switch (st.kind) {
    case Stmt::Kind::kText:
      *out_ += st.text;
      RETURN_IF_ERROR(CheckOutput(st.line));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*st.expr));
      *out_ += v.Str();
      RETURN_IF_ERROR(CheckOutput(st.line));
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
    case Stmt::Kind::kMacro: {
      Value m = MakeMacro(st, Value::Undefined());
      m.macro = &st;
      scopes_.back()[st.text] = m;
      return Flow::kNormal;
    }
    case Stmt::Kind::kCallBlock: return ExecCallBlock(st);
  }
  return Flow::kNormal;
}

Renderer::~Renderer() {
  for (const std::shared_ptr<Object>& ns : namespaces_) ns->items.clear();
}

Status Renderer::Assign(const std::vector<std::string>& targets, const Value& v, int line,
                        Scope* scope) {
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

Result<Flow> Renderer::ExecSet(const Stmt& st) {
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
    namespaces_.insert(ns.obj);
    ns.obj->Set(st.attr, std::move(v));
    return Flow::kNormal;
  }
  RETURN_IF_ERROR(Assign(st.targets, v, st.line, &scopes_.back()));
  return Flow::kNormal;
}

Result<Array> Renderer::LoopItems(const Stmt& st, const Value& seq) {
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
  if (!st.cond) return items;
  Array kept;  // the filter runs before the loop, so loop.* counts the kept items
  for (const auto& x : items) {
    scopes_.emplace_back();
    Status s = Assign(st.targets, x, st.line, &scopes_.back());
    auto c = s.ok() ? Eval(*st.cond) : Result<Value>(s);
    scopes_.pop_back();
    if (!c.ok()) return c.status();
    if (c->Truthy()) kept.push_back(x);
  }
  return kept;
}

Result<Flow> Renderer::ExecFor(const Stmt& st) {
  ASSIGN_OR_RETURN(Value seq, Eval(*st.expr));
  ASSIGN_OR_RETURN(Array items, LoopItems(st, seq));
  std::vector<Scope> base;
  if (st.recursive) base = scopes_;  // what loop(...) renders its items in
  return LoopOver(st, items, 1, base);
}

Result<Flow> Renderer::LoopOver(const Stmt& st, const Array& items, int64_t depth,
                                const std::vector<Scope>& base) {
  if (items.empty()) {  // `else` is a scope of its own too
    scopes_.emplace_back();
    auto f = Run(st.else_body);
    scopes_.pop_back();
    return f;
  }
  if (depth > kMaxCallDepth) {
    return Err(st.line, fmt::format("a recursive loop nested deeper than {} levels",
                                    kMaxCallDepth));
  }
  const int64_t n = int64_t(items.size());
  for (int64_t k = 0; k < n; ++k) {
    if (++loop_iterations_ > kMaxLoopIterations) {
      return Err(st.line, fmt::format("more than {} loop iterations in one rendering",
                                      kMaxLoopIterations));
    }
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
    o.Set("depth", Value::Int(depth));
    o.Set("depth0", Value::Int(depth - 1));
    o.Set("previtem", k > 0 ? items[size_t(k - 1)] : Value::Undefined("previtem"));
    o.Set("nextitem", k + 1 < n ? items[size_t(k + 1)] : Value::Undefined("nextitem"));
    if (st.recursive) {
      o.call = std::make_shared<Function>([this, &st, depth, &base](CallArgs& a) -> Result<Value> {
        if (a.positional.size() != 1 || !a.keyword.empty()) {
          return Err(st.line, "loop() takes the items to loop over");
        }
        ASSIGN_OR_RETURN(Array inner, LoopItems(st, a.positional[0]));
        std::string text;
        std::string* saved_out = std::exchange(out_, &text);
        std::vector<Scope> saved = std::exchange(scopes_, base);
        auto f = LoopOver(st, inner, depth + 1, base);
        scopes_ = std::move(saved);
        out_ = saved_out;
        if (!f.ok()) return f.status();
        return Value::Str(std::move(text));
      });
    }
    scopes_.back()["loop"] = loop;
    Status s = Assign(st.targets, items[size_t(k)], st.line, &scopes_.back());
    auto f = s.ok() ? Run(st.body) : Result<Flow>(s);
    scopes_.pop_back();
    if (!f.ok()) return f.status();
    if (*f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

namespace {

// Whether the body of a macro or call block names `name` (varargs, kwargs): only then may a
// call pass extra positional or keyword arguments, as in Jinja.
bool Names(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == Expr::Kind::kName && e->name == name) return true;
  if (Names(e->a.get(), name) || Names(e->b.get(), name)) return true;
  for (const auto& x : e->items) if (Names(x.get(), name)) return true;
  for (const auto& [k, x] : e->kwargs) if (Names(x.get(), name)) return true;
  return false;
}

bool Names(const Body& body, const std::string& name) {
  for (const auto& st : body) {
    if (Names(st->expr.get(), name) || Names(st->cond.get(), name)) return true;
    for (const auto& [c, b] : st->branches) if (Names(c.get(), name) || Names(b, name)) return true;
    for (const auto& d : st->defaults) if (Names(d.get(), name)) return true;
    if (Names(st->body, name) || Names(st->else_body, name)) return true;
  }
  return false;
}

}  // namespace

Status Renderer::BindParameters(const Stmt& st, const std::string& what, CallArgs& args,
                                Scope* scope) {
  const size_t n = st.targets.size();
  std::vector<bool> bound(n, false);
  for (size_t k = 0; k < n && k < args.positional.size(); ++k) {
    (*scope)[st.targets[k]] = args.positional[k];
    bound[k] = true;
  }
  Value extra_kw = Value::Dict();
  for (auto& [key, v] : args.keyword) {
    auto it = std::find(st.targets.begin(), st.targets.end(), key);
    if (it == st.targets.end()) {
      extra_kw.obj->Set(key, v);
      continue;
    }
    const size_t k = size_t(it - st.targets.begin());
    if (bound[k]) return Err(st.line, fmt::format("{} got multiple values for '{}'", what, key));
    (*scope)[key] = v;
    bound[k] = true;
  }
  Array extra_pos;
  for (size_t k = n; k < args.positional.size(); ++k) extra_pos.push_back(args.positional[k]);
  if (!extra_pos.empty() && !Names(st.body, "varargs")) {
    return Err(st.line, fmt::format("{} takes not more than {} argument(s)", what, n));
  }
  if (!extra_kw.obj->items.empty() && !Names(st.body, "kwargs")) {
    return Err(st.line, fmt::format("{} takes no keyword argument '{}'", what,
                                    extra_kw.obj->items.front().first));
  }
  (*scope)["varargs"] = Value::List(std::move(extra_pos));
  (*scope)["varargs"].tuple = true;
  (*scope)["kwargs"] = extra_kw;
  for (size_t k = 0; k < n; ++k) {
    if (bound[k]) continue;
    (*scope)[st.targets[k]] = Value::Undefined(st.targets[k]);
  }
  // Defaults are evaluated with the parameters bound (a default may name an earlier one).
  std::vector<Scope> saved = std::exchange(scopes_, {scopes_.front(), *scope});
  Status status = Status::Ok();
  for (size_t k = 0; k < n && status.ok(); ++k) {
    if (bound[k] || !st.defaults[k]) continue;
    auto v = Eval(*st.defaults[k]);
    if (!v.ok()) status = v.status();
    else (*scope)[st.targets[k]] = scopes_.back()[st.targets[k]] = *v;
  }
  scopes_ = std::move(saved);
  return status;
}

Result<std::string> Renderer::Capture(const Body& body, std::vector<Scope> scopes) {
  if (call_depth_ >= kMaxCallDepth) {
    const int line = body.empty() ? 0 : body.front()->line;
    return Err(line, fmt::format("macro calls nested deeper than {} levels (runaway recursion?)",
                                 kMaxCallDepth));
  }
  std::string text;
  std::string* saved_out = std::exchange(out_, &text);
  std::vector<Scope> saved = std::exchange(scopes_, std::move(scopes));
  ++call_depth_;
  auto f = Run(body);
  --call_depth_;
  scopes_ = std::move(saved);
  out_ = saved_out;
  if (!f.ok()) return f.status();
  return text;
}

// A macro: a function that renders its body with the parameters bound, in the template's
// top-level names (not the caller's locals). `caller` is set for a call block's call.
Value Renderer::MakeMacro(const Stmt& st, Value caller) {
  return Value::Fn([this, &st, caller](CallArgs& args) -> Result<Value> {
    Scope params;
    if (!caller.is_undefined()) params["caller"] = caller;
    RETURN_IF_ERROR(BindParameters(st, fmt::format("macro '{}'", st.text), args, &params));
    ASSIGN_OR_RETURN(std::string text, Capture(st.body, {scopes_.front(), std::move(params)}));
    return Value::Str(std::move(text));
  });
}

// {% call(params) m(args) %}body{% endcall %}: m is called with `caller` bound to a
// function rendering the body (with the params) where the call block stands.
Result<Flow> Renderer::ExecCallBlock(const Stmt& st) {
  const Expr& call = *st.expr;
  ASSIGN_OR_RETURN(Value f, Eval(*call.a));
  if (f.kind != Value::Kind::kFunction || !f.macro) {
    return Err(st.line, "a call block must call a macro");
  }
  std::vector<Scope> here = scopes_;
  Value caller = Value::Fn([this, &st, here](CallArgs& args) -> Result<Value> {
    Scope params;
    RETURN_IF_ERROR(BindParameters(st, "the call block", args, &params));
    std::vector<Scope> scopes = here;
    scopes.push_back(std::move(params));
    ASSIGN_OR_RETURN(std::string text, Capture(st.body, std::move(scopes)));
    return Value::Str(std::move(text));
  });
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call));
  Value with_caller = MakeMacro(*f.macro, caller);
  auto r = (*with_caller.fn)(args);
  if (!r.ok()) return r.status();
  *out_ += r->Str();
  RETURN_IF_ERROR(CheckOutput(st.line));
  return Flow::kNormal;
}

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
