// The expression parser of one template tag (Jinja precedence: ternary, or, and, not,
// comparisons and `in`, + -, ~, * / // %, **, unary, postfix calls, attributes,
// subscripts and slices, filters and tests). Used by parser.cc's statement parser.
//
// Thread-safety: a parser is used by one thread.
#pragma once

#include <string>
#include <vector>

#include "data/chat_template/ast.h"
#include "data/chat_template/lexer.h"

namespace tandem::chat_template {

class ExprParser {
 public:
  ExprParser(std::vector<Token> toks, int line);
  const Token& Peek(size_t k = 0) const;
  bool IsOp(const char* op, size_t k = 0) const;
  bool IsName(const char* n, size_t k = 0) const;
  bool AtEnd() const;
  Token Next();
  Status Expect(const char* op);
  Status Error(const std::string& what) const;
  Result<std::string> Name();
  // An expression (a ternary `a if cond else b` at the top).
  Result<ExprPtr> Parse();
  // An expression that stops before a trailing `if` (for-loop filters).
  Result<ExprPtr> ParseNoTernary();

 private:
  Result<ExprPtr> Binary(ExprPtr a, std::string op, ExprPtr b);
  Result<ExprPtr> Or();
  Result<ExprPtr> And();
  Result<ExprPtr> Not();
  Result<ExprPtr> Compare();
  Result<ExprPtr> Math1();
  Result<ExprPtr> Concat();
  Result<ExprPtr> Math2();
  Result<ExprPtr> Pow();
  Result<ExprPtr> Unary();
  Status Args(Expr* e);  // after '('
  Result<ExprPtr> Postfix(ExprPtr a);
  Result<ExprPtr> Subscript(ExprPtr a);  // after '['
  Result<ExprPtr> FilterAndTest(ExprPtr a);
  Result<ExprPtr> Primary();

  // Counts one nesting level while alive; Error past kMaxNesting.
  struct Nest {
    explicit Nest(ExprParser* p) : p(p) { ++p->depth_; }
    ~Nest() { --p->depth_; }
    Status Check() const;
    ExprParser* p;
  };

  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
  int depth_ = 0;
};

}  // namespace tandem::chat_template
