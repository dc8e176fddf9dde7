#include "data/chat_template/parser.h"

#include <set>

#include "data/chat_template/expr_parser.h"
#include "data/chat_template/lexer.h"
#include "data/chat_template/limits.h"

namespace tandem::chat_template {
namespace {

// Statements over the template's segments.
class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  // Parses statements until a statement tag whose first word is in `ends` (consumed; its
  // word in *ended and its parser in *tag), or the end of the template when `ends` is empty.
  Status ParseBody(const std::set<std::string>& ends, Body* body, std::string* ended,
                   std::unique_ptr<ExprParser>* tag) {
    if (depth_ >= kMaxNesting) {
      const int line = i_ > 0 ? segs_[i_ - 1].line : 1;
      return InvalidArgumentError("chat_template:{}: blocks nested deeper than {} levels", line,
                                  kMaxNesting);
    }
    ++depth_;
    Status st = ParseStatements(ends, body, ended, tag);
    --depth_;
    return st;
  }

 private:
  Status ParseStatements(const std::set<std::string>& ends, Body* body, std::string* ended,
                         std::unique_ptr<ExprParser>* tag) {
    while (i_ < segs_.size()) {
      const Segment& s = segs_[i_++];
      if (s.kind == Segment::Kind::kText) {
        auto st = std::make_unique<Stmt>();
        st->kind = Stmt::Kind::kText;
        st->line = s.line;
        st->text = s.text;
        body->push_back(std::move(st));
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<Token> toks, Tokenize(s.text, s.line));
      auto p = std::make_unique<ExprParser>(std::move(toks), s.line);
      if (s.kind == Segment::Kind::kExpr) {
        auto st = std::make_unique<Stmt>();
        st->kind = Stmt::Kind::kOutput;
        st->line = s.line;
        ASSIGN_OR_RETURN(st->expr, p->Parse());
        if (!p->AtEnd()) return p->Error("unexpected tokens after the expression");
        body->push_back(std::move(st));
        continue;
      }
      ASSIGN_OR_RETURN(std::string word, p->Name());
      if (ends.count(word)) {
        *ended = word;
        *tag = std::move(p);
        return Status::Ok();
      }
      ASSIGN_OR_RETURN(auto st, Statement(word, *p, s.line));
      body->push_back(std::move(st));
    }
    if (!ends.empty()) {
      return InvalidArgumentError("chat_template: the template ends inside a block; expected '{}'",
                                  *ends.begin());
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<Stmt>> Statement(const std::string& word, ExprParser& p, int line) {
    auto st = std::make_unique<Stmt>();
    st->line = line;
    std::string ended;
    std::unique_ptr<ExprParser> tag;
    if (word == "if") {
      st->kind = Stmt::Kind::kIf;
      ASSIGN_OR_RETURN(ExprPtr cond, p.Parse());
      RETURN_IF_ERROR(EndOfTag(p));
      while (true) {
        Body b;
        RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &b, &ended, &tag));
        st->branches.emplace_back(std::move(cond), std::move(b));
        if (ended == "elif") {
          ASSIGN_OR_RETURN(cond, tag->Parse());
          RETURN_IF_ERROR(EndOfTag(*tag));
          continue;
        }
        if (ended == "else") {
          RETURN_IF_ERROR(EndOfTag(*tag));
          RETURN_IF_ERROR(ParseBody({"endif"}, &st->else_body, &ended, &tag));
        }
        return st;
      }
    }
    if (word == "for") {
      st->kind = Stmt::Kind::kFor;
      while (true) {
        ASSIGN_OR_RETURN(std::string n, p.Name());
        st->targets.push_back(n);
        if (!p.IsOp(",")) break;
        p.Next();
      }
      if (!p.IsName("in")) return p.Error("expected 'in'");
      p.Next();
      ASSIGN_OR_RETURN(st->expr, p.ParseNoTernary());
      if (p.IsName("if")) {
        p.Next();
        ASSIGN_OR_RETURN(st->cond, p.ParseNoTernary());
      }
      if (p.IsName("recursive")) {
        p.Next();
        st->recursive = true;
      }
      RETURN_IF_ERROR(EndOfTag(p));
      RETURN_IF_ERROR(ParseBody({"else", "endfor"}, &st->body, &ended, &tag));
      if (ended == "else") {
        RETURN_IF_ERROR(EndOfTag(*tag));
        RETURN_IF_ERROR(ParseBody({"endfor"}, &st->else_body, &ended, &tag));
      }
      return st;
    }
    if (word == "set") {
      st->kind = Stmt::Kind::kSet;
      while (true) {
        ASSIGN_OR_RETURN(std::string n, p.Name());
        st->targets.push_back(n);
        if (p.IsOp(".")) {
          p.Next();
          ASSIGN_OR_RETURN(st->attr, p.Name());
        }
        if (!p.IsOp(",")) break;
        p.Next();
      }
      if (!st->attr.empty() && st->targets.size() != 1) return p.Error("bad set target");
      if (p.AtEnd()) {  // block set
        RETURN_IF_ERROR(ParseBody({"endset"}, &st->body, &ended, &tag));
        return st;
      }
      RETURN_IF_ERROR(p.Expect("="));
      ASSIGN_OR_RETURN(st->expr, p.Parse());
      RETURN_IF_ERROR(EndOfTag(p));
      return st;
    }
    if (word == "break" || word == "continue") {
      st->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(EndOfTag(p));
      return st;
    }
    if (word == "macro") {
      st->kind = Stmt::Kind::kMacro;
      ASSIGN_OR_RETURN(st->text, p.Name());
      RETURN_IF_ERROR(p.Expect("("));
      RETURN_IF_ERROR(Parameters(p, st.get()));
      RETURN_IF_ERROR(EndOfTag(p));
      RETURN_IF_ERROR(ParseBody({"endmacro"}, &st->body, &ended, &tag));
      return st;
    }
    if (word == "call") {
      st->kind = Stmt::Kind::kCallBlock;
      if (p.IsOp("(")) {
        p.Next();
        RETURN_IF_ERROR(Parameters(p, st.get()));
      }
      ASSIGN_OR_RETURN(st->expr, p.Parse());
      if (st->expr->kind != Expr::Kind::kCall) return p.Error("expected a macro call");
      RETURN_IF_ERROR(EndOfTag(p));
      RETURN_IF_ERROR(ParseBody({"endcall"}, &st->body, &ended, &tag));
      return st;
    }
    if (word == "generation") {
      st->kind = Stmt::Kind::kBlock;
      RETURN_IF_ERROR(EndOfTag(p));
      RETURN_IF_ERROR(ParseBody({"endgeneration"}, &st->body, &ended, &tag));
      return st;
    }
    return Unsupported(word, line);
  }

  // `name [= default], ...)` after the '(' of a macro or call block.
  static Status Parameters(ExprParser& p, Stmt* st) {
    while (!p.IsOp(")")) {
      ASSIGN_OR_RETURN(std::string n, p.Name());
      st->targets.push_back(n);
      ExprPtr dflt;
      if (p.IsOp("=")) {
        p.Next();
        ASSIGN_OR_RETURN(dflt, p.Parse());
      }
      st->defaults.push_back(std::move(dflt));
      if (!p.IsOp(",")) break;
      p.Next();
    }
    return p.Expect(")");
  }
  static Status Unsupported(const std::string& what, int line) {
    return InvalidArgumentError("chat_template:{}: unsupported construct '{}'", line, what);
  }
  static Status EndOfTag(ExprParser& p) {
    return p.AtEnd() ? Status::Ok() : p.Error("unexpected tokens at the end of the tag");
  }

  std::vector<Segment> segs_;
  size_t i_ = 0;
  int depth_ = 0;  // ParseBody calls active
};

}  // namespace

Result<Body> ParseTemplate(const std::string& source) {
  ASSIGN_OR_RETURN(std::vector<Segment> segs, SplitTemplate(source));
  StmtParser p(std::move(segs));
  Body body;
  std::string ended;
  std::unique_ptr<ExprParser> tag;
  RETURN_IF_ERROR(p.ParseBody({}, &body, &ended, &tag));
  return body;
}

}  // namespace tandem::chat_template
