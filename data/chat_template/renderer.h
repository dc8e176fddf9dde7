// The tree-walking renderer behind ChatTemplate::Render: statements in render.cc (output,
// if, for with loop.* and recursion, set with Jinja's scoping, macros and call blocks),
// expressions in render_expr.cc.
//
// Scoping follows Python Jinja2, which transformers renders with: each for-loop iteration
// is a scope of its own, so a `set` inside a loop is seen by the rest of that iteration
// only, neither by the next iteration nor after the loop (carry state across iterations
// with a namespace); `if` opens no scope. A macro body sees its parameters, `varargs`,
// `kwargs`, `caller` and the template's top-level names, not the caller's local ones; a call
// block's body sees the names where it stands.
//
// Rendering is bounded by limits.h: call and recursive-loop depth, loop iterations, the
// size of the output and of every string and list; past one, Run returns InvalidArgument
// naming the template line and the limit.
//
// Values never outlive their rendering, and a namespace is the one value changed after it is
// made, so the one that can hold itself (`{% set ns.me = ns %}`, or through a list): the
// renderer clears the fields of every namespace set into when it is destroyed, so such a
// cycle is freed rather than leaked by every rendering.
//
// Thread-safety: one Renderer per rendering.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "data/chat_template/ast.h"

namespace tandem::chat_template {

enum class Flow { kNormal, kBreak, kContinue };

Status Err(int line, const std::string& what);

class Renderer {
 public:
  explicit Renderer(std::string* out) : out_(out) { scopes_.emplace_back(); }
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  void Define(const std::string& k, Value v) { scopes_.front()[k] = std::move(v); }
  Result<Flow> Run(const Body& body);

 private:
  using Scope = std::map<std::string, Value>;

  Value Lookup(const std::string& name) const;
  Result<Flow> Exec(const Stmt& st);
  Status Assign(const std::vector<std::string>& targets, const Value& v, int line, Scope* scope);
  Result<Flow> ExecSet(const Stmt& st);
  Result<Flow> ExecFor(const Stmt& st);
  // Renders `items` (already filtered) through the loop's body at recursion depth `depth`.
  Result<Flow> LoopOver(const Stmt& st, const Array& items, int64_t depth,
                        const std::vector<Scope>& base);
  Result<Array> LoopItems(const Stmt& st, const Value& seq);
  Value MakeMacro(const Stmt& st, Value caller);
  Status BindParameters(const Stmt& st, const std::string& what, CallArgs& args, Scope* scope);
  Result<Flow> ExecCallBlock(const Stmt& st);
  // Runs `body` in `scopes`, returning what it printed; the renderer's scopes are restored.
  Result<std::string> Capture(const Body& body, std::vector<Scope> scopes);

  Result<CallArgs> EvalArgs(const Expr& e);
  Result<Value> Index(const Value& a, const Value& key, int line);
  Result<Value> Slice(const Expr& e);
  Result<Value> Binary(const Expr& e);
  Result<Value> Call(const Expr& e);
  // Eval checks the size of what EvalNode returns (limits.h).
  Result<Value> Eval(const Expr& e);
  Result<Value> EvalNode(const Expr& e);
  // Error once out_ holds more than kMaxOutputBytes.
  Status CheckOutput(int line) const;

  std::string* out_;
  std::vector<Scope> scopes_;
  int call_depth_ = 0;          // macro and call-block bodies rendering now
  int64_t loop_iterations_ = 0;  // for-loop iterations so far, all loops together
  int64_t evaluated_bytes_ = 0;  // strings and lists evaluated so far (kMaxEvaluatedBytes)
  std::unordered_set<std::shared_ptr<Object>> namespaces_;  // set into; cleared at the end
};

}  // namespace tandem::chat_template
