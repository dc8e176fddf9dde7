// Lexer and parser for the Jinja subset chat templates use, with Hugging Face's environment
// settings: trim_blocks, lstrip_blocks, no trailing newline kept, `-` whitespace control.
// Statements: if/elif/else, for (tuple targets, `if` filter, else, recursive), set (names,
// namespace attributes, block set), break/continue, macro (parameters with defaults), call
// blocks (with caller parameters), generation. Anything else (filter blocks, include,
// import, extends, block, raw, with) is InvalidArgument naming the construct and its line:
// "chat_template:12: unsupported construct 'include'".
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "data/chat_template/ast.h"

namespace tandem::chat_template {

Result<Body> ParseTemplate(const std::string& source);

}  // namespace tandem::chat_template
