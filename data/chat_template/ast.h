// The syntax tree of a chat template: expressions and statements, each with its line in the
// template for error messages. Built by parser.cc, walked by render.cc.
//
// Thread-safety: immutable after parsing; safe to render from many threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/chat_template/value.h"

namespace tandem::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // items
    kDict,      // items as key, value pairs
    kAttr,      // a.name
    kIndex,     // a[b]
    kSlice,     // a[b:c:d] (items 0..2 may be null)
    kCall,      // a(items..., kw...)
    kFilter,    // a | name(items..., kw...)
    kTest,      // a is [not] name(items...)
    kUnary,     // op a   ("not", "-", "+")
    kBinary,    // a op b
    kTernary,   // items[0] if a else items[1]
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // kName, kAttr, kFilter, kTest, operators
  bool negated = false;
  ExprPtr a, b;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (cond, body)...; else_body
    kFor,       // targets in expr [if cond]: body; else_body
    kSet,       // targets[0] (or ns.attr when attr set) = expr, or a block set with body
    kBreak,
    kContinue,
    kBlock,     // {% generation %}: renders its body
    kMacro,     // macro `text`(targets with defaults): body
    kCallBlock, // call(targets with defaults) expr: body, the macro's caller()
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::vector<ExprPtr> defaults;  // kMacro, kCallBlock: per target, null when none
  bool recursive = false;         // kFor: `recursive`, loop(items) renders it again
  std::string attr;  // kSet on a namespace: targets[0].attr
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
};

}  // namespace tandem::chat_template
