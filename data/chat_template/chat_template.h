// A chat template (tokenizer_config.json's `chat_template`, Jinja) parsed once and rendered
// with Hugging Face's semantics: trim_blocks, lstrip_blocks, Python-like values, tojson as
// json.dumps(ensure_ascii=False), raise_exception, strftime_now, namespace, loop.*.
//
//   ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Parse(config["chat_template"]));
//   ASSIGN_OR_RETURN(std::string text, t.Render({{"messages", msgs},
//                                                {"add_generation_prompt", false}}));
//
// Errors name the template line: "chat_template:37: unsupported filter 'wordwrap'",
// "chat_template:12: unsupported construct 'macro'". An error raised by the template
// (raise_exception) is InvalidArgument "the chat template raised: ...". Parsing and
// rendering are bounded (limits.h): a template nested too deeply is refused by Parse; one
// that recurses, loops or grows past a limit fails that Render with an error naming it.
//
// Thread-safety: immutable after Parse; Render may run on many threads at once.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/core/status.h"

namespace tandem::chat_template {

struct Stmt;

class ChatTemplate {
 public:
  static Result<ChatTemplate> Parse(const std::string& source);

  // `context` is a JSON object of the template's variables (messages, tools,
  // add_generation_prompt, enable_thinking, bos_token, ...). Missing ones are undefined.
  Result<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace tandem::chat_template
