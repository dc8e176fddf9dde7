// Resource limits of the chat-template interpreter. A template comes from a model's
// tokenizer_config.json, text nobody reviewed; like any sandboxed Jinja, parsing and
// rendering are bounded in stack depth, time and memory so that a hostile or broken
// template is an error (refused at Parse, or a per-line render error), never a crash, a
// hang or an exhausted machine. Real chat templates stay far inside every bound: they nest
// a few blocks deep, recurse (macros over tool JSON schemas) fewer than 15 levels, loop over
// a conversation's messages and render at most a few MB.
//
// Thread-safety: constants only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::chat_template {

// Blocks ({% if %}, {% for %}, ...) nested inside each other, and expression nesting
// (parentheses, brackets, call arguments, unary operators) within one tag: the parser and
// the renderer recurse once per level.
inline constexpr int kMaxNesting = 64;
// Tokens in one tag: bounds the depth of operator chains (`1+1+...`), which the parser
// builds without recursion but the renderer evaluates recursively.
inline constexpr size_t kMaxTagTokens = 2048;
// Macro calls and recursive-loop levels active at once.
inline constexpr int kMaxCallDepth = 64;
// Bytes of the rendered text, and of any one string value (128k tokens are about 0.5 MB).
inline constexpr size_t kMaxOutputBytes = size_t{16} << 20;
// Elements of one list a template builds or reads (range(), +, messages, tools).
inline constexpr int64_t kMaxListItems = int64_t{1} << 18;
// For-loop iterations in one rendering, all loops together (about 3 s of rendering).
inline constexpr int64_t kMaxLoopIterations = int64_t{1} << 20;
// Bytes of the strings and lists a rendering evaluates, all together (a list item counts as
// sizeof(Value)): growing a string or list by repeated concatenation in a loop copies it
// every time, a cost quadratic in its length that the other limits leave at hours; this
// bounds it to about a second. Real templates evaluate a few times their output.
inline constexpr int64_t kMaxEvaluatedBytes = int64_t{1} << 30;
// Nesting of a value printed by tojson or compared with ==: values from JSON are at most
// 128 deep; a namespace can hold itself.
inline constexpr int kMaxValueDepth = 256;

}  // namespace tandem::chat_template
