// Splits a template into text and tags (applying whitespace control, trim_blocks and
// lstrip_blocks), and a tag's inside into expression tokens.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::chat_template {

struct Segment {
  enum class Kind { kText, kExpr, kStmt };
  Kind kind;
  std::string text;  // the text, or the tag's inside without delimiters and '-'/'+'
  int line = 0;
};

Result<std::vector<Segment>> SplitTemplate(const std::string& source);

struct Token {
  enum class Kind { kName, kInt, kFloat, kString, kOp, kEnd };
  Kind kind;
  std::string text;  // name, operator, or decoded string
  int64_t i = 0;
  double f = 0;
};

// Tokens of a tag's inside, ending with kEnd.
Result<std::vector<Token>> Tokenize(const std::string& inside, int line);

}  // namespace tandem::chat_template
