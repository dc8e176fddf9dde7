// Fuzzes one line of a chat JSONL file (OpenAI or ShareGPT, data/chat/conversation.h) through
// the Qwen3 tokenizer and chat template (fuzz_encoder.h) to training examples with their loss
// masks: a bad line is a known reason code, never an exception; a conversation holds OpenAI
// messages; every example has a mask as long as its ids, ids the tokenizer knows, at least
// one trained token and no more than max_tokens; EncodePrompt's ids are known too.
//
// Input layout: [flags:1][line]. flags bits 0-1: format (auto = detected, openai, sharegpt);
// bit 2: require an assistant turn; bit 3: last turn only; bit 4: train reasoning; bits 5-6:
// split_turns (off, on, auto) or, with both set, enable_thinking = false; bit 7: max_tokens
// = 48, overlong examples dropped when bit 2 is clear.
#include <set>
#include <string>
#include <string_view>

#include "data/chat/chat_encoder.h"
#include "data/chat/conversation.h"
#include "fuzz/fuzz_encoder.h"
#include "fuzz/fuzz_util.h"

using namespace tandem::chat_data;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tandem::fuzz::FixtureEncoder();  // the load is not part of the first input's time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  const std::string_view line(reinterpret_cast<const char*>(data + 1), size - 1);
  ChatFormat format = ChatFormat::kOpenAI;
  switch (flags & 3) {
    case 0: format = DetectFormat(line); break;
    case 1: format = ChatFormat::kOpenAI; break;
    default: format = ChatFormat::kShareGpt; break;
  }
  if (format == ChatFormat::kAuto) return 0;
  const bool require_assistant = (flags & 4) != 0;
  Conversation c;
  BadLine bad;
  if (!ParseConversation(line, format, &c, &bad, require_assistant)) {
    static const std::set<std::string> kReasons = {
        "not_json", "not_object", "invalid_utf8", "integer_too_large", "wrong_format",
        "no_messages", "unknown_role", "missing_content", "assistant_first", "no_assistant"};
    TANDEM_FUZZ_ASSERT(kReasons.count(bad.reason) == 1 && !bad.message.empty());
    return 0;
  }
  TANDEM_FUZZ_ASSERT(c.messages.is_array() && !c.messages.empty());
  for (const auto& m : c.messages) {
    TANDEM_FUZZ_ASSERT(m.is_object() && m.contains("role") && m["role"].is_string());
  }

  ChatEncodeOptions o;
  o.last_turn_only = (flags & 8) != 0;
  o.train_reasoning = (flags & 16) != 0;
  const int split = (flags >> 5) & 3;
  o.split_turns = split == 0 ? SplitTurns::kOff : split == 1 ? SplitTurns::kOn : SplitTurns::kAuto;
  if (split == 3) o.enable_thinking = false;
  if (flags & 128) {
    o.max_tokens = 48;
    o.drop_overlong = !require_assistant;
  }
  const ChatEncoder enc = tandem::fuzz::FixtureEncoder().WithOptions(o);
  const uint32_t bound = enc.tokenizer().vocab_bound();
  ChatEncoder::Scratch scratch;
  const EncodeOutcome out = enc.Encode(c, scratch);
  for (const Example& ex : out.examples) {
    TANDEM_FUZZ_ASSERT(ex.ids.size() == ex.mask.size() && !ex.ids.empty());
    TANDEM_FUZZ_ASSERT(o.max_tokens == 0 || int64_t(ex.ids.size()) <= o.max_tokens);
    bool any = false;
    for (size_t k = 0; k < ex.ids.size(); ++k) {
      TANDEM_FUZZ_ASSERT(ex.ids[k] < bound && ex.mask[k] <= 1);
      any = any || ex.mask[k] == 1;
    }
    TANDEM_FUZZ_ASSERT(any);
  }
  for (const auto& [reason, n] : out.events) TANDEM_FUZZ_ASSERT(n > 0);
  auto prompt = enc.EncodePrompt(c, scratch);
  if (prompt.ok()) {
    for (uint32_t id : *prompt) TANDEM_FUZZ_ASSERT(id < bound);
  }
  return 0;
}
