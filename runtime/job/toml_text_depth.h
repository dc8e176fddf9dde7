// A bound on how deeply a TOML text nests tables and arrays, found by scanning the text
// before any TOML parser sees it.
//
// toml++ recurses once per nesting level while parsing (and its tables free themselves
// recursively), so a dotted key of 200,000 parts (`b.b.b...`, 400 KB) overflows the stack
// inside toml::parse, before a check on the parsed table could run. This scan counts the
// levels that table headers (`[a.b]`, `[[a.b]]`), dotted keys (`a.b = 1`), inline tables and
// arrays open, without recursion, so a hostile job file is refused (the daemon parses what
// clients submit in-process). It follows TOML's strings (basic, literal, multi-line, with
// escapes) and comments, so dots and brackets inside them do not count. The count is exact
// for well-formed TOML; for malformed text it can be off, which the parser then reports.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

#include "runtime/core/status.h"

namespace tandem {

// InvalidArgument "PATH:LINE: ...: tables and arrays nested deeper than MAX levels" naming
// the start of the offending key when `text` nests deeper than `max_depth`.
Status CheckTomlTextDepth(std::string_view text, const std::string& path, int max_depth);

}  // namespace tandem
