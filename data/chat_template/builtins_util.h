// Helpers shared by the chat-template builtins (filters.cc, methods.cc, builtins_util.cc):
// Python's string semantics over code points, iteration and ordering of values.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "data/chat_template/value.h"

namespace tandem::chat_template {

Status Err(int line, const std::string& what);
// Python's str.isspace() for one code point.
bool IsPySpace(const std::string& cp);
// Python's str.split(sep, maxsplit); `sep` null means runs of whitespace.
std::vector<std::string> Split(const std::string& s, const Value* sep, int64_t maxsplit);
std::string Upper(std::string s, bool up);
std::string Title(const std::string& s);
std::string Replace(const std::string& s, const std::string& a, const std::string& b,
                    int64_t count);
Result<int64_t> Length(const Value& v, int line);
// What a for loop or a filter iterates: list items, code points, dict keys.
Result<Array> Items(const Value& v, int line);
Value Attribute(const Value& v, const std::string& name);
// Argument `i` or keyword `name` when it is a string, else null.
const Value* StrArg(const CallArgs& a, size_t i, const char* name);
// The order sort and max/min use.
bool Less(const Value& a, const Value& b);

}  // namespace tandem::chat_template
