#include "data/chat/conversation.h"

#include "data/tokenizer/utf8.h"
#include "runtime/core/json_parse.h"

namespace tandem::chat_data {
namespace {

using nlohmann::ordered_json;

bool Fail(BadLine* bad, const char* reason, std::string message) {
  bad->reason = reason;
  bad->message = std::move(message);
  return false;
}

// Content as a string: a string, or a list of {"type": "text", "text": ...} parts joined.
bool ContentString(const ordered_json& c, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) return false;
  out->clear();
  for (const auto& part : c) {
    // Every field is type-checked first: value("type", "") throws on a non-string type.
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string() ||
        part["type"].get<std::string>() != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return false;
    }
    *out += part["text"].get<std::string>();
  }
  return true;
}

// The first integer literal of `line` (outside strings) beyond int64 below zero or beyond
// uint64 above it, or empty. nlohmann reads such a literal as a double, so a tool
// argument of 2^64 would be rendered as 1.8446744073709552e+19: the line is refused instead.
std::string FindHugeInteger(std::string_view line) {
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    size_t j = i + (c == '-' ? 1 : 0);
    const size_t digits_at = j;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
    const bool integer = j == line.size() || (line[j] != '.' && line[j] != 'e' && line[j] != 'E');
    const std::string_view digits = line.substr(digits_at, j - digits_at);
    if (integer && digits.size() >= 19) {
      const std::string_view max = c == '-' ? "9223372036854775808" : "18446744073709551615";
      if (digits.size() > max.size() || (digits.size() == max.size() && digits > max)) {
        return std::string(line.substr(i, j - i));
      }
    }
    i = j > i ? j - 1 : i;
    while (i + 1 < line.size() && (line[i + 1] == '.' || line[i + 1] == 'e' || line[i + 1] == 'E' ||
                                   line[i + 1] == '+' || line[i + 1] == '-' ||
                                   (line[i + 1] >= '0' && line[i + 1] <= '9'))) {
      ++i;  // the rest of a non-integer number
    }
  }
  return {};
}

}  // namespace

Result<ChatFormat> ParseChatFormat(std::string_view name) {
  if (name == "auto") return ChatFormat::kAuto;
  if (name == "openai") return ChatFormat::kOpenAI;
  if (name == "sharegpt") return ChatFormat::kShareGpt;
  return InvalidArgumentError("unknown chat format '{}' (auto, openai or sharegpt)", name);
}

const char* ChatFormatName(ChatFormat f) {
  switch (f) {
    case ChatFormat::kOpenAI: return "openai";
    case ChatFormat::kShareGpt: return "sharegpt";
    default: return "auto";
  }
}

ChatFormat DetectFormat(std::string_view line) {
  if (tokenizer::FindInvalidUtf8(line) >= 0) return ChatFormat::kAuto;
  Result<ordered_json> parsed = ParseOrderedJson(line, "line");
  if (!parsed.ok() || !parsed->is_object()) return ChatFormat::kAuto;
  const ordered_json& j = *parsed;
  if (j.contains("messages")) return ChatFormat::kOpenAI;
  if (j.contains("conversations")) return ChatFormat::kShareGpt;
  return ChatFormat::kAuto;
}

bool ParseConversation(std::string_view line, ChatFormat format, Conversation* out,
                       BadLine* bad, bool require_assistant) {
  if (int64_t at = tokenizer::FindInvalidUtf8(line); at >= 0) {
    return Fail(bad, "invalid_utf8", fmt::format("invalid UTF-8 at byte {}", at));
  }
  Result<ordered_json> parsed = ParseOrderedJson(line, "not valid JSON");
  if (!parsed.ok()) return Fail(bad, "not_json", parsed.status().message());
  const ordered_json& j = *parsed;
  if (!j.is_object()) return Fail(bad, "not_object", "not a JSON object");
  if (std::string big = FindHugeInteger(line); !big.empty()) {
    return Fail(bad, "integer_too_large",
                fmt::format("the integer {} does not fit 64 bits (it would be rendered inexactly)",
                            big.size() > 40 ? big.substr(0, 40) + "..." : big));
  }
  const bool openai = format == ChatFormat::kOpenAI;
  const char* key = openai ? "messages" : "conversations";
  if (!j.contains(key)) {
    return Fail(bad, "wrong_format",
                fmt::format("no \"{}\" key (the file is read as {})", key, ChatFormatName(format)));
  }
  const ordered_json& msgs = j[key];
  if (!msgs.is_array() || msgs.empty()) {
    return Fail(bad, "no_messages", fmt::format("\"{}\" is not a non-empty array", key));
  }
  out->messages = ordered_json::array();
  out->tools = j.contains("tools") ? j["tools"] : ordered_json();
  bool has_assistant = false;
  bool seen_user = false;
  int64_t early_assistant = -1;  // the first assistant turn before any user turn
  for (size_t k = 0; k < msgs.size(); ++k) {
    const ordered_json& m = msgs[k];
    if (!m.is_object()) return Fail(bad, "not_object", fmt::format("{}[{}] is not an object", key, k));
    const char* role_key = openai ? "role" : "from";
    const char* content_key = openai ? "content" : "value";
    if (!m.contains(role_key) || !m[role_key].is_string()) {
      return Fail(bad, "unknown_role", fmt::format("{}[{}] has no \"{}\" string", key, k, role_key));
    }
    std::string role = m[role_key].get<std::string>();
    if (!openai) {
      if (role == "human") role = "user";
      else if (role == "gpt") role = "assistant";
    }
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return Fail(bad, "unknown_role", fmt::format("{}[{}] has unknown role '{}'", key, k, role));
    }
    ordered_json msg = openai ? m : ordered_json::object();
    msg["role"] = role;
    std::string content;
    const bool has_calls = openai && m.contains("tool_calls") && m["tool_calls"].is_array() &&
                           !m["tool_calls"].empty();
    if (m.contains(content_key) && ContentString(m[content_key], &content)) {
      msg["content"] = content;
    } else if (has_calls && (!m.contains(content_key) || m[content_key].is_null())) {
      msg["content"] = "";
    } else {
      return Fail(bad, "missing_content",
                  fmt::format("{}[{}] ({}) has no string \"{}\"", key, k, role, content_key));
    }
    if (!openai) msg.erase("from");
    if (openai && msg.contains("reasoning_content") && !msg["reasoning_content"].is_null() &&
        !msg["reasoning_content"].is_string()) {
      return Fail(bad, "missing_content", fmt::format("{}[{}] reasoning_content is not a string", key, k));
    }
    // Chat templates expect a user turn before the first assistant turn; many raise an
    // exception otherwise, which would be reported as a template error naming neither cause.
    // Training refuses such a conversation; a prompt (require_assistant false) only when a
    // user turn follows, as a lone trailing assistant turn is dropped from a prompt.
    if (role == "assistant" && !seen_user && early_assistant < 0) early_assistant = int64_t(k);
    if (role == "user" && early_assistant >= 0) break;
    seen_user = seen_user || role == "user";
    has_assistant = has_assistant || role == "assistant";
    out->messages.push_back(std::move(msg));
  }
  if (early_assistant >= 0 && (require_assistant || out->messages.size() < msgs.size())) {
    return Fail(bad, "assistant_first",
                fmt::format("{}[{}] is an assistant turn before any user turn", key,
                            early_assistant));
  }
  if (!has_assistant && require_assistant) return Fail(bad, "no_assistant", "no assistant message to train on");
  return true;
}

}  // namespace tandem::chat_data
