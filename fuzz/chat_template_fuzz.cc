// Fuzzes the chat-template engine (tokenizer_config.json's chat_template, Jinja text nobody
// reviewed) and the context it renders: Parse and Render return errors, never throw, crash or
// hang (limits.h bounds nesting, recursion, loops and output), and an accepted rendering is
// within the output limit. Parse errors name the template's line.
//
// Input layout: [template]\0[context: a JSON object]. Without a NUL, or when the context is
// not a JSON object, the template renders a fixed conversation (system, user, assistant
// with reasoning and a tool call, tool, user), two tools and add_generation_prompt.
#include <cstring>
#include <string>
#include <string_view>

#include "data/chat_template/chat_template.h"
#include "data/chat_template/limits.h"
#include "fuzz/fuzz_util.h"
#include "runtime/core/json_parse.h"

using namespace tandem::chat_template;
using nlohmann::ordered_json;

namespace {

const ordered_json& DefaultContext() {
  static const ordered_json ctx = ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2+2? <tool_response>x</tool_response>"},
      {"role": "assistant", "content": "<think>\nadd\n</think>\n\nCalling.",
       "reasoning_content": "add",
       "tool_calls": [{"type": "function",
                       "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "content": "4"},
      {"role": "user", "content": "Thanks, ünïcödé 你好"}],
    "tools": [{"type": "function", "function": {"name": "add", "description": "a+b",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                              "b": {"type": "integer", "maximum": 18446744073709551615}}}}},
              {"type": "function", "function": {"name": "now", "parameters": {}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string source(all.substr(0, nul));
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) {
    TANDEM_FUZZ_ASSERT(t.status().message().find("chat_template") != std::string::npos);
    return 0;
  }
  const ordered_json* ctx = &DefaultContext();
  tandem::Result<ordered_json> given = tandem::InvalidArgumentError("none");
  if (nul != std::string_view::npos) {
    given = tandem::ParseOrderedJson(all.substr(nul + 1), "context");
    if (given.ok() && given->is_object()) ctx = &*given;
  }
  auto text = t->Render(*ctx);
  if (text.ok()) TANDEM_FUZZ_ASSERT(text->size() <= kMaxOutputBytes);
  return 0;
}
