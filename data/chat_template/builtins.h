// Filters, tests, methods and global functions of the chat-template interpreter: what
// Hugging Face's Jinja environment offers templates (jinja2's builtins plus tojson,
// raise_exception and strftime_now) that chat templates use. An unknown name is
// InvalidArgument naming it and the template line.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "data/chat_template/value.h"

namespace tandem::chat_template {

Result<Value> ApplyFilter(const std::string& name, const Value& v, CallArgs& args, int line);
Result<bool> ApplyTest(const std::string& name, const Value& v, CallArgs& args, int line);
// obj.name(args) for str, list and dict methods.
Result<Value> CallMethod(const Value& obj, const std::string& name, CallArgs& args, int line);
// range, namespace, raise_exception, strftime_now, dict; Undefined for other names.
Value Global(const std::string& name);

// Python str.strip family over code points; `chars` null means whitespace.
std::string Strip(const std::string& s, const std::string* chars, bool left, bool right);

}  // namespace tandem::chat_template
