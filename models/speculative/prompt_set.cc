#include "models/speculative/prompt_set.h"

#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/chat/conversation.h"
#include "models/io/file_util.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {

namespace {

using nlohmann::ordered_json;

constexpr const char* kIdFields[] = {"input_ids", "prompt_ids", "ids", "tokens"};
constexpr size_t kMaxReasons = 8;

struct FormatName {
  PromptFormat format;
  const char* name;
};
constexpr FormatName kFormats[] = {
    {PromptFormat::kAuto, "auto"},         {PromptFormat::kIds, "ids"},
    {PromptFormat::kOpenAI, "openai"},     {PromptFormat::kShareGpt, "sharegpt"},
    {PromptFormat::kMtBench, "mt-bench"},  {PromptFormat::kGsm8k, "gsm8k"},
    {PromptFormat::kMath500, "math500"},   {PromptFormat::kHumanEval, "humaneval"},
    {PromptFormat::kMbpp, "mbpp"}};

// A bad line: a reason code and what is wrong; `layout` when the line lacks the file's
// layout's field (the message then says how the layout was chosen).
struct Bad {
  std::string reason, why;
  bool layout = false;
};

// The text of a single-text layout's line, or what is wrong.
std::optional<std::string> LineText(const ordered_json& j, PromptFormat f, Bad* bad) {
  const char* key = nullptr;
  switch (f) {
    case PromptFormat::kGsm8k: key = "question"; break;
    case PromptFormat::kMath500: key = "problem"; break;
    case PromptFormat::kHumanEval: key = "prompt"; break;
    case PromptFormat::kMbpp: key = j.contains("text") ? "text" : "prompt"; break;
    default: break;
  }
  const ordered_json* v = nullptr;
  std::string what;
  if (f == PromptFormat::kMtBench) {
    if (!j.contains("turns") || !j["turns"].is_array() || j["turns"].empty()) {
      *bad = {"malformed", "no non-empty \"turns\" array", true};
      return std::nullopt;
    }
    v = &j["turns"][0];
    what = "\"turns\"[0]";
  } else {
    if (!j.contains(key)) {
      *bad = {"malformed",
              f == PromptFormat::kMbpp ? std::string("no \"text\" or \"prompt\" field")
                                       : fmt::format("no \"{}\" field", key),
              true};
      return std::nullopt;
    }
    v = &j[key];
    what = fmt::format("\"{}\"", key);
  }
  if (!v->is_string()) {
    *bad = {"malformed", fmt::format("{} is not a string", what)};
    return std::nullopt;
  }
  std::string text = v->get<std::string>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    *bad = {"empty", fmt::format("{} is empty", what)};
    return std::nullopt;
  }
  return text;
}

// The token ids of an ids line (unchecked against vocab and length), or what is wrong.
std::optional<std::vector<int64_t>> LineIds(const ordered_json& j, Bad* bad) {
  const ordered_json* ids = nullptr;
  const char* name = nullptr;
  for (const char* f : kIdFields)
    if (j.contains(f)) {
      ids = &j[f];
      name = f;
      break;
    }
  if (ids == nullptr) {
    *bad = {"malformed", "no \"input_ids\" array", true};
    return std::nullopt;
  }
  if (!ids->is_array()) {
    *bad = {"malformed", fmt::format("\"{}\" is not an array", name)};
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < ids->size(); ++i) {
    if (!(*ids)[i].is_number_integer()) {
      *bad = {"malformed", fmt::format("id {} is not an integer", i)};
      return std::nullopt;
    }
    out.push_back((*ids)[i].get<int64_t>());
  }
  return out;
}

bool IsChat(PromptFormat f) { return f == PromptFormat::kOpenAI || f == PromptFormat::kShareGpt; }

// Reads the lines of one file in one layout.
class Reader {
 public:
  Reader(const std::string& source, const PromptLoadOptions& o) : source_(source), o_(o) {}

  // The prompt of `line` (appended to *out), or what is wrong; a file-level failure (no
  // tokenizer) in *fatal.
  std::optional<Bad> Line(std::string_view line, PromptFormat f, std::vector<int32_t>* out,
                          Status* fatal) {
    std::vector<int64_t> ids;
    if (IsChat(f)) {
      chat_data::Conversation conv;
      chat_data::BadLine bl;
      const auto cf = f == PromptFormat::kOpenAI ? chat_data::ChatFormat::kOpenAI
                                                 : chat_data::ChatFormat::kShareGpt;
      if (!chat_data::ParseConversation(line, cf, &conv, &bl, /*require_assistant=*/false))
        return Bad{"malformed", bl.message, bl.reason == "wrong_format"};
      if (auto bad = Encode(conv, &ids, fatal)) return bad;
    } else {
      if (!CheckJsonDepth(line, "").ok())
        return Bad{"malformed", fmt::format("nested deeper than {} levels", kMaxJsonDepth)};
      Result<ordered_json> parsed = ParseOrderedJson(line, "");
      if (!parsed.ok()) return Bad{"malformed", "not valid JSON"};
      const ordered_json& j = *parsed;
      if (!j.is_object()) return Bad{"malformed", "not a JSON object"};
      Bad bad;
      if (f == PromptFormat::kIds) {
        auto got = LineIds(j, &bad);
        if (!got) return bad;
        ids = std::move(*got);
      } else {
        auto text = LineText(j, f, &bad);
        if (!text) return bad;
        chat_data::Conversation conv;
        conv.messages = ordered_json::array({{{"role", "user"}, {"content", *text}}});
        if (auto b = Encode(conv, &ids, fatal)) return b;
      }
    }
    if (ids.empty()) return Bad{"empty", "empty prompt"};
    if (o_.max_tokens > 0 && static_cast<int64_t>(ids.size()) > o_.max_tokens)
      return Bad{"too_long", fmt::format("{} tokens, over the limit of {}{}", ids.size(),
                                         o_.max_tokens,
                                         o_.max_tokens_origin.empty()
                                             ? ""
                                             : fmt::format(" ({})", o_.max_tokens_origin))};
    out->clear();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= o_.vocab)
        return Bad{"bad_token_id",
                   fmt::format("id {} is {}, not in [0, {}){}", i, ids[i], o_.vocab,
                               f == PromptFormat::kIds
                                   ? ""
                                   : " (the tokenizer's ids do not fit the model's vocab)")};
      out->push_back(static_cast<int32_t>(ids[i]));
    }
    return std::nullopt;
  }

 private:
  std::optional<Bad> Encode(const chat_data::Conversation& conv, std::vector<int64_t>* ids,
                            Status* fatal) {
    const chat_data::ChatEncoder* enc = o_.encoder;
    if (enc == nullptr) {
      if (!loaded_ && o_.tokenizer_dir.empty()) {
        *fatal = InvalidArgumentError(
            "{}: text and chat prompts need the model's tokenizer and chat template, and none "
            "was given", source_);
        return Bad{"template_error", fatal->message()};
      }
      if (!loaded_) {
        chat_data::ChatEncodeOptions eo;
        eo.enable_thinking = o_.enable_thinking;
        auto e = chat_data::ChatEncoder::Load(o_.tokenizer_dir, eo);
        if (!e.ok()) {
          *fatal = e.status().WithContext(
              fmt::format("{}: loading the tokenizer for text and chat prompts", source_));
          return Bad{"template_error", fatal->message()};
        }
        loaded_.emplace(std::move(*e));
      }
      enc = &*loaded_;
    }
    auto got = enc->EncodePrompt(conv, scratch_);
    if (!got.ok()) return Bad{"template_error", got.status().message()};
    ids->assign(got->begin(), got->end());
    return std::nullopt;
  }

  const std::string& source_;
  const PromptLoadOptions& o_;
  std::optional<chat_data::ChatEncoder> loaded_;
  chat_data::ChatEncoder::Scratch scratch_;
};

bool Blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

bool TooLong(std::string_view line, const PromptLoadOptions& o) {
  return o.max_line_bytes > 0 && static_cast<int64_t>(line.size()) > o.max_line_bytes;
}

// Calls f(line_no, line) for every non-blank line until it returns false.
template <typename F>
void ForEachLine(std::string_view text, F f) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!Blank(line) && !f(line_no, line)) return;
  }
}

}  // namespace

Result<PromptFormat> ParsePromptFormat(std::string_view name) {
  for (const FormatName& f : kFormats)
    if (name == f.name) return f.format;
  return InvalidArgumentError("unknown prompt format '{}' (auto, ids, openai, sharegpt, "
                              "mt-bench, gsm8k, math500, humaneval or mbpp)", name);
}

const char* PromptFormatName(PromptFormat f) {
  for (const FormatName& n : kFormats)
    if (n.format == f) return n.name;
  return "auto";
}

PromptFormat DetectPromptFormat(std::string_view line) {
  Result<ordered_json> parsed = ParseOrderedJson(line, "");
  if (!parsed.ok() || !parsed->is_object()) return PromptFormat::kAuto;
  const ordered_json& j = *parsed;
  for (const char* f : kIdFields)
    if (j.contains(f)) return PromptFormat::kIds;
  if (j.contains("messages")) return PromptFormat::kOpenAI;
  if (j.contains("conversations")) return PromptFormat::kShareGpt;
  if (j.contains("turns")) return PromptFormat::kMtBench;
  if (j.contains("question")) return PromptFormat::kGsm8k;
  if (j.contains("problem")) return PromptFormat::kMath500;
  if (j.contains("text")) return PromptFormat::kMbpp;
  if (j.contains("prompt"))
    return j.contains("test_list") ? PromptFormat::kMbpp : PromptFormat::kHumanEval;
  return PromptFormat::kAuto;
}

Result<PromptSet> ReadPromptSet(std::string_view text, const std::string& source,
                                const PromptLoadOptions& o) {
  PromptSet set;
  set.format = o.format;
  std::string how = fmt::format("given as {}", PromptFormatName(o.format));
  if (set.format == PromptFormat::kAuto) {
    ForEachLine(text, [&](int64_t no, std::string_view line) {
      if (TooLong(line, o)) return true;  // not parsed, not even to detect the layout
      set.format = DetectPromptFormat(line);
      how = fmt::format("detected from line {}", no);
      return set.format == PromptFormat::kAuto;
    });
  }
  Reader reader(source, o);
  Status fatal = Status::Ok();
  std::vector<int32_t> ids;
  ForEachLine(text, [&](int64_t no, std::string_view line) {
    ++set.lines;
    std::optional<Bad> bad;
    if (TooLong(line, o))
      bad = Bad{"line_too_long", fmt::format("{} bytes, over the limit of {} (--max-line-bytes); "
                                             "not parsed", line.size(), o.max_line_bytes)};
    else if (set.format == PromptFormat::kAuto)
      bad = Bad{"malformed", "no prompt field (input_ids, messages, conversations, turns, "
                             "question, problem, prompt or text)"};
    else
      bad = reader.Line(line, set.format, &ids, &fatal);
    if (!fatal.ok()) return false;
    if (!bad) {
      set.prompts.push_back(ids);
      set.line_numbers.push_back(no);
      return true;
    }
    std::string why = bad->why;
    if (bad->layout)
      why += fmt::format(" (the file is read as {}, {})", PromptFormatName(set.format), how);
    const std::string where = fmt::format("{}:{}: {}", source, no, why);
    if (!o.skip_bad) {
      fatal = InvalidArgumentError("{} (--skip-bad skips and counts bad lines)", where);
      return false;
    }
    ++set.skipped;
    ++set.skipped_by_reason[bad->reason];
    if (set.skip_reasons.size() < kMaxReasons) set.skip_reasons.push_back(where);
    return true;
  });
  RETURN_IF_ERROR(fatal);
  if (set.lines == 0)
    return InvalidArgumentError("{}: empty: no prompt lines (one JSON object per line)", source);
  if (set.prompts.empty())
    return InvalidArgumentError("{}: no usable prompt ({} lines, all skipped; first: {})",
                                source, set.lines, set.skip_reasons[0]);
  return set;
}

Result<PromptSet> LoadPromptSet(const std::string& path, const PromptLoadOptions& o) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ReadPromptSet(text, path, o);
}

}  // namespace tandem::models
