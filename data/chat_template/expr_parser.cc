#include "data/chat_template/expr_parser.h"

#include "data/chat_template/limits.h"

namespace tandem::chat_template {
namespace {

using TK = Token::Kind;

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

}  // namespace

ExprParser::ExprParser(std::vector<Token> toks, int line) : t_(std::move(toks)), line_(line) {}

const Token& ExprParser::Peek(size_t k) const { return t_[std::min(p_ + k, t_.size() - 1)]; }

bool ExprParser::IsOp(const char* op, size_t k) const {
  return Peek(k).kind == TK::kOp && Peek(k).text == op;
}

bool ExprParser::IsName(const char* n, size_t k) const {
  return Peek(k).kind == TK::kName && Peek(k).text == n;
}

bool ExprParser::AtEnd() const { return Peek().kind == TK::kEnd; }

Token ExprParser::Next() { return t_[std::min(p_++, t_.size() - 1)]; }

Status ExprParser::Expect(const char* op) {
  if (!IsOp(op)) return Error(fmt::format("expected '{}'", op));
  ++p_;
  return Status::Ok();
}

Status ExprParser::Error(const std::string& what) const {
  const Token& t = Peek();
  return InvalidArgumentError("chat_template:{}: {} near '{}'", line_, what,
                              t.kind == TK::kEnd ? "end of tag" : t.text);
}

Result<std::string> ExprParser::Name() {
  if (Peek().kind != TK::kName) return Error("expected a name");
  return Next().text;
}

Status ExprParser::Nest::Check() const {
  if (p->t_.size() > kMaxTagTokens) {
    return InvalidArgumentError("chat_template:{}: a tag of {} tokens (the limit is {})", p->line_,
                                p->t_.size(), kMaxTagTokens);
  }
  if (p->depth_ > kMaxNesting) {
    return p->Error(fmt::format("expression nested deeper than {} levels", kMaxNesting));
  }
  return Status::Ok();
}

Result<ExprPtr> ExprParser::Parse() {  // ternary: a if cond else b
  Nest nest(this);
  RETURN_IF_ERROR(nest.Check());
  ASSIGN_OR_RETURN(ExprPtr a, Or());
  if (!IsName("if")) return a;
  ++p_;
  auto e = MakeExpr(Expr::Kind::kTernary, line_);
  ASSIGN_OR_RETURN(e->a, Or());
  e->items.push_back(std::move(a));
  if (IsName("else")) {
    ++p_;
    ASSIGN_OR_RETURN(ExprPtr b, Parse());
    e->items.push_back(std::move(b));
  } else {
    auto u = MakeExpr(Expr::Kind::kLiteral, line_);
    e->items.push_back(std::move(u));
  }
  return e;
}

Result<ExprPtr> ExprParser::ParseNoTernary() {
  Nest nest(this);
  RETURN_IF_ERROR(nest.Check());
  return Or();
}

Result<ExprPtr> ExprParser::Binary(ExprPtr a, std::string op, ExprPtr b) {
  auto e = MakeExpr(Expr::Kind::kBinary, line_);
  e->name = std::move(op);
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}

Result<ExprPtr> ExprParser::Or() {
  ASSIGN_OR_RETURN(ExprPtr a, And());
  while (IsName("or")) {
    ++p_;
    ASSIGN_OR_RETURN(ExprPtr b, And());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), "or", std::move(b)));
  }
  return a;
}

Result<ExprPtr> ExprParser::And() {
  ASSIGN_OR_RETURN(ExprPtr a, Not());
  while (IsName("and")) {
    ++p_;
    ASSIGN_OR_RETURN(ExprPtr b, Not());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), "and", std::move(b)));
  }
  return a;
}

Result<ExprPtr> ExprParser::Not() {
  if (IsName("not")) {
    Nest nest(this);
    RETURN_IF_ERROR(nest.Check());
    ++p_;
    auto e = MakeExpr(Expr::Kind::kUnary, line_);
    e->name = "not";
    ASSIGN_OR_RETURN(e->a, Not());
    return e;
  }
  return Compare();
}

Result<ExprPtr> ExprParser::Compare() {
  ASSIGN_OR_RETURN(ExprPtr a, Math1());
  while (true) {
    std::string op;
    if (Peek().kind == TK::kOp && (Peek().text == "==" || Peek().text == "!=" ||
                                   Peek().text == "<" || Peek().text == ">" ||
                                   Peek().text == "<=" || Peek().text == ">=")) {
      op = Next().text;
    } else if (IsName("in")) {
      ++p_;
      op = "in";
    } else if (IsName("not") && IsName("in", 1)) {
      p_ += 2;
      op = "not in";
    } else {
      return a;
    }
    ASSIGN_OR_RETURN(ExprPtr b, Math1());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), op, std::move(b)));
  }
}

Result<ExprPtr> ExprParser::Math1() {
  ASSIGN_OR_RETURN(ExprPtr a, Concat());
  while (IsOp("+") || IsOp("-")) {
    std::string op = Next().text;
    ASSIGN_OR_RETURN(ExprPtr b, Concat());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), op, std::move(b)));
  }
  return a;
}

Result<ExprPtr> ExprParser::Concat() {
  ASSIGN_OR_RETURN(ExprPtr a, Math2());
  while (IsOp("~")) {
    ++p_;
    ASSIGN_OR_RETURN(ExprPtr b, Math2());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), "~", std::move(b)));
  }
  return a;
}

Result<ExprPtr> ExprParser::Math2() {
  ASSIGN_OR_RETURN(ExprPtr a, Pow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    std::string op = Next().text;
    ASSIGN_OR_RETURN(ExprPtr b, Pow());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), op, std::move(b)));
  }
  return a;
}

Result<ExprPtr> ExprParser::Pow() {
  ASSIGN_OR_RETURN(ExprPtr a, Unary());
  while (IsOp("**")) {
    ++p_;
    ASSIGN_OR_RETURN(ExprPtr b, Unary());
    ASSIGN_OR_RETURN(a, Binary(std::move(a), "**", std::move(b)));
  }
  return a;
}

Result<ExprPtr> ExprParser::Unary() {
  if (IsOp("-") || IsOp("+")) {
    Nest nest(this);
    RETURN_IF_ERROR(nest.Check());
    auto e = MakeExpr(Expr::Kind::kUnary, line_);
    e->name = Next().text;
    ASSIGN_OR_RETURN(e->a, Unary());
    return e;
  }
  ASSIGN_OR_RETURN(ExprPtr a, Primary());
  ASSIGN_OR_RETURN(a, Postfix(std::move(a)));
  return FilterAndTest(std::move(a));
}

Status ExprParser::Args(Expr* e) {  // after '('
  while (!IsOp(")")) {
    if (Peek().kind == TK::kName && IsOp("=", 1)) {
      std::string k = Next().text;
      ++p_;
      ASSIGN_OR_RETURN(ExprPtr v, Parse());
      e->kwargs.emplace_back(std::move(k), std::move(v));
    } else {
      ASSIGN_OR_RETURN(ExprPtr v, Parse());
      e->items.push_back(std::move(v));
    }
    if (!IsOp(",")) break;
    ++p_;
  }
  return Expect(")");
}

Result<ExprPtr> ExprParser::Postfix(ExprPtr a) {
  while (true) {
    if (IsOp(".")) {
      ++p_;
      auto e = MakeExpr(Expr::Kind::kAttr, line_);
      if (Peek().kind == TK::kInt) {
        e->kind = Expr::Kind::kIndex;
        e->b = MakeExpr(Expr::Kind::kLiteral, line_);
        e->b->value = Value::Int(Next().i);
      } else {
        ASSIGN_OR_RETURN(e->name, Name());
      }
      e->a = std::move(a);
      a = std::move(e);
    } else if (IsOp("[")) {
      ++p_;
      ASSIGN_OR_RETURN(a, Subscript(std::move(a)));
    } else if (IsOp("(")) {
      ++p_;
      auto e = MakeExpr(Expr::Kind::kCall, line_);
      e->a = std::move(a);
      RETURN_IF_ERROR(Args(e.get()));
      a = std::move(e);
    } else {
      return a;
    }
  }
}

Result<ExprPtr> ExprParser::Subscript(ExprPtr a) {  // after '['
  ExprPtr parts[3];
  int colons = 0;
  while (!IsOp("]")) {
    if (IsOp(":")) {
      if (++colons > 2) return Error("too many ':' in a slice");
      ++p_;
      continue;
    }
    ASSIGN_OR_RETURN(parts[colons], Parse());
  }
  ++p_;
  if (colons == 0) {
    if (!parts[0]) return Error("empty subscript");
    auto e = MakeExpr(Expr::Kind::kIndex, line_);
    e->a = std::move(a);
    e->b = std::move(parts[0]);
    return e;
  }
  auto e = MakeExpr(Expr::Kind::kSlice, line_);
  e->a = std::move(a);
  for (auto& p : parts) e->items.push_back(std::move(p));
  return e;
}

Result<ExprPtr> ExprParser::FilterAndTest(ExprPtr a) {
  while (true) {
    if (IsOp("|")) {
      ++p_;
      auto e = MakeExpr(Expr::Kind::kFilter, line_);
      ASSIGN_OR_RETURN(e->name, Name());
      if (IsOp("(")) {
        ++p_;
        RETURN_IF_ERROR(Args(e.get()));
      }
      e->a = std::move(a);
      ASSIGN_OR_RETURN(a, Postfix(std::move(e)));
    } else if (IsName("is")) {
      ++p_;
      auto e = MakeExpr(Expr::Kind::kTest, line_);
      if (IsName("not")) {
        ++p_;
        e->negated = true;
      }
      ASSIGN_OR_RETURN(e->name, Name());
      if (IsOp("(")) {
        ++p_;
        RETURN_IF_ERROR(Args(e.get()));
      } else if (Peek().kind == TK::kString || Peek().kind == TK::kInt ||
                 Peek().kind == TK::kFloat ||
                 (Peek().kind == TK::kName && !IsName("and") && !IsName("or") &&
                  !IsName("if") && !IsName("else") && !IsName("is") && !IsName("in") &&
                  !IsName("not"))) {
        ASSIGN_OR_RETURN(ExprPtr arg, Primary());
        e->items.push_back(std::move(arg));
      }
      e->a = std::move(a);
      a = std::move(e);
    } else {
      return a;
    }
  }
}

Result<ExprPtr> ExprParser::Primary() {
  const Token t = Next();
  auto lit = [&](Value v) {
    auto e = MakeExpr(Expr::Kind::kLiteral, line_);
    e->value = std::move(v);
    return e;
  };
  switch (t.kind) {
    case TK::kInt: return lit(Value::Int(t.i));
    case TK::kFloat: return lit(Value::Float(t.f));
    case TK::kString: {
      std::string s = t.text;
      while (Peek().kind == TK::kString) s += Next().text;  // adjacent literals join
      return lit(Value::Str(s));
    }
    case TK::kName: {
      if (t.text == "true" || t.text == "True") return lit(Value::Bool(true));
      if (t.text == "false" || t.text == "False") return lit(Value::Bool(false));
      if (t.text == "none" || t.text == "None") return lit(Value::None());
      auto e = MakeExpr(Expr::Kind::kName, line_);
      e->name = t.text;
      return e;
    }
    case TK::kOp:
      if (t.text == "(") {
        ASSIGN_OR_RETURN(ExprPtr inner, Parse());
        if (IsOp(",")) {  // a tuple: a list here
          auto e = MakeExpr(Expr::Kind::kList, line_);
          e->name = "tuple";
          e->items.push_back(std::move(inner));
          while (IsOp(",")) {
            ++p_;
            if (IsOp(")")) break;
            ASSIGN_OR_RETURN(ExprPtr x, Parse());
            e->items.push_back(std::move(x));
          }
          inner = std::move(e);
        }
        RETURN_IF_ERROR(Expect(")"));
        return inner;
      }
      if (t.text == "[") {
        auto e = MakeExpr(Expr::Kind::kList, line_);
        while (!IsOp("]")) {
          ASSIGN_OR_RETURN(ExprPtr x, Parse());
          e->items.push_back(std::move(x));
          if (!IsOp(",")) break;
          ++p_;
        }
        RETURN_IF_ERROR(Expect("]"));
        return e;
      }
      if (t.text == "{") {
        auto e = MakeExpr(Expr::Kind::kDict, line_);
        while (!IsOp("}")) {
          ASSIGN_OR_RETURN(ExprPtr k, Parse());
          RETURN_IF_ERROR(Expect(":"));
          ASSIGN_OR_RETURN(ExprPtr v, Parse());
          e->items.push_back(std::move(k));
          e->items.push_back(std::move(v));
          if (!IsOp(",")) break;
          ++p_;
        }
        RETURN_IF_ERROR(Expect("}"));
        return e;
      }
      break;
    default: break;
  }
  --p_;
  return Error("unexpected token");
}

}  // namespace tandem::chat_template
