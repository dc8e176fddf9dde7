// Chat conversations read from JSONL, one per line, in either of two formats:
//   OpenAI:   {"messages": [{"role": "system"|"user"|"assistant"|"tool", "content": "...",
//              "reasoning_content"?: "...", "tool_calls"?: [...]}], "tools"?: [...]}
//   ShareGPT: {"conversations": [{"from": "system"|"human"|"gpt", "value": "..."}]}
// Both become OpenAI-style messages (ShareGPT's human/gpt are user/assistant). A bad line is
// an error with a reason code that the caller counts: not_json, not_object, invalid_utf8,
// integer_too_large (an integer literal beyond int64/uint64, which JSON parsing would turn
// into an inexact double), wrong_format, no_messages, unknown_role, missing_content,
// assistant_first (an assistant turn before any user turn; for a prompt only when a user
// turn follows it), no_assistant. A line nested deeper than kMaxJsonDepth is
// not_json. Nothing here throws, whatever the line holds.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/core/status.h"

namespace tandem::chat_data {

enum class ChatFormat { kAuto, kOpenAI, kShareGpt };

// "auto", "openai", "sharegpt"; InvalidArgument otherwise.
Result<ChatFormat> ParseChatFormat(std::string_view name);
const char* ChatFormatName(ChatFormat f);

struct Conversation {
  nlohmann::ordered_json messages;  // array of OpenAI-style message objects
  nlohmann::ordered_json tools;     // null or the line's "tools"
};

struct BadLine {
  std::string reason;   // a code from the list above
  std::string message;  // what is wrong, without the file and line
};

// The format of a line (by its top-level key), or kAuto when it has neither key or is not
// a JSON object.
ChatFormat DetectFormat(std::string_view line);

// Parses one line in `format` (not kAuto). On failure fills *bad and returns false.
// `require_assistant` false accepts conversations without an assistant message (prompts).
bool ParseConversation(std::string_view line, ChatFormat format, Conversation* out, BadLine* bad,
                       bool require_assistant = true);

}  // namespace tandem::chat_data
