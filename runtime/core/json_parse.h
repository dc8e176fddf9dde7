// Bounded JSON parsing: the one way tandem turns outside text into an nlohmann value.
//
// nlohmann's parser is iterative, but copying, converting, comparing and dump()ing a value
// recurse once per nesting level, so a 50,000-deep `[[[[...]]]]` (a 100 KB file) overflows
// the stack wherever such a value is used later. ParseJson refuses text nested deeper than
// `max_depth` (kMaxJsonDepth unless given) before building anything, so every value it
// returns is safe to copy, convert and print. No input tandem reads comes near the limit:
// config.json, safetensors headers, metrics lines and checkpoint state nest 2-4 levels,
// tokenizer.json about 6, and a chat record's tool schemas (JSON Schema objects inside
// function definitions inside messages) rarely more than 15.
//
// The daemon parses what clients submit (job files, their models' config.json) inside its
// own process; with bounded parsing a hostile or corrupt file is an error for that request,
// never a crash of the daemon and every job it runs.
//
// Errors are Status values (InvalidArgument) naming `what` (a path, or "path:line" for a
// JSONL record), the line and the byte offset. Nothing here throws.
//
// DescribeJson renders a value for an error message, cut at `max_chars`: a message that
// quotes a bad value never carries megabytes of it.
//
// Thread-safety: free functions without shared state; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/core/status.h"

namespace tandem {

// The deepest nesting of arrays and objects accepted: `[[1]]` is 2 deep, a scalar 0.
inline constexpr int kMaxJsonDepth = 128;

// Parses `text` as one JSON value. InvalidArgument naming `what`, the line and the byte
// offset when it is malformed or nested deeper than `max_depth`.
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what,
                                 int max_depth = kMaxJsonDepth);
// The same into an ordered_json (keys keep the text's order).
Result<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, std::string_view what,
                                                int max_depth = kMaxJsonDepth);

// Only the depth check of ParseJson, for a parser that needs nlohmann's callback itself (the
// safetensors header's duplicate-key check): Ok, or the error ParseJson would return.
Status CheckJsonDepth(std::string_view text, std::string_view what, int max_depth = kMaxJsonDepth);

// Reads the file at `path` (at most `max_bytes`) and parses it with ParseJson; NotFound when
// it cannot be opened, InvalidArgument when larger than `max_bytes`. `what` names it in
// errors (the path when empty).
Result<nlohmann::json> ReadJsonFile(const std::string& path, std::string_view what = {},
                                    size_t max_bytes = size_t{1} << 30);

// The value as compact JSON, at most about `max_chars` characters: longer renderings end in
// "..." followed by the full size ("... (an array of 3000000 elements)").
std::string DescribeJson(const nlohmann::json& v, size_t max_chars = 120);
std::string DescribeJson(const nlohmann::ordered_json& v, size_t max_chars = 120);

}  // namespace tandem
