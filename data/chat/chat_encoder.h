// Turns a conversation into training examples: the model's own chat template rendered and
// tokenized exactly as transformers does, with a loss mask over the assistant turns.
//
// The mask is found without knowing the template: for assistant message i, the conversation
// up to i rendered with add_generation_prompt=True is tokenized, and where its tokens stop
// agreeing with the example's tokens is where the assistant's turn starts; it ends with the
// first end-of-turn token (tokenizer_config's eos_token, e.g. <|im_end|>) at or after that
// point, which is included, and never later than where the template's rendering of that turn
// ends. That end is found the same way, from renders: the conversation up to the turn
// followed by one user message (P) and by two (Q); Q minus P is the rendering of a user
// message U, and P without U ends where the turn does (when P ends with U and agrees with the
// example up to there; otherwise only the end token bounds the span). An assistant span that
// ends without the end token (a base model's config, whose eos_token <|endoftext|> a chat
// template never writes) is counted in EncodeOutcome::warnings (no_end_token). Options:
//   turns          all assistant turns, or the last only
//   reasoning      train on <think>...</think> (and the newlines after it) or not
//   split_turns    off; on (one example per assistant turn, the conversation up to that turn
//                  rendered alone and only that turn masked); auto (on when an earlier
//                  assistant turn carries reasoning, which templates such as Qwen3's drop)
//   max_tokens     longer examples are truncated (kept when loss remains) or dropped
//
//   ASSIGN_OR_RETURN(ChatEncoder enc, ChatEncoder::Load("Qwen3-8B/", options));
//   ChatEncoder::Scratch scratch;   // one per thread
//   EncodeOutcome r = enc.Encode(conversation, scratch);
//
// Thread-safety: a ChatEncoder is immutable after Load; Encode may run on many threads with
// one Scratch each.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/chat/conversation.h"
#include "data/chat_template/chat_template.h"
#include "data/tokenizer/tokenizer.h"

namespace tandem::chat_data {

enum class SplitTurns { kOff, kOn, kAuto };

struct ChatEncodeOptions {
  bool last_turn_only = false;
  bool train_reasoning = true;
  SplitTurns split_turns = SplitTurns::kAuto;
  std::optional<bool> enable_thinking;  // passed to the template when set
  int64_t max_tokens = 0;               // 0: no limit
  bool drop_overlong = false;           // false: truncate
};

struct Example {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;  // [ids.size()] 1 = trained on
};

struct EncodeOutcome {
  std::vector<Example> examples;
  // Reason code -> examples dropped or cut: too_long (dropped), truncated (kept, cut),
  // no_loss (nothing to train on, e.g. empty assistant spans after truncation),
  // template_error, tokenize_error.
  std::map<std::string, int64_t> events;
  std::string error;  // the first template or tokenizer message, for the report
  // Reason code -> assistant spans: no_end_token (the span ended where the template's
  // rendering of its turn ends, without the configured end-of-turn token).
  std::map<std::string, int64_t> warnings;
};

class ChatEncoder {
 public:
  struct Scratch {
    tokenizer::EncodeScratch tok;
  };

  // Reads DIR/tokenizer.json and DIR/tokenizer_config.json (chat_template, eos_token and the
  // other special tokens). Errors name the file.
  static Result<ChatEncoder> Load(const std::string& dir, const ChatEncodeOptions& options);

  // The same tokenizer and template with other options.
  ChatEncoder WithOptions(const ChatEncodeOptions& options) const {
    ChatEncoder e = *this;
    e.options_ = options;
    return e;
  }

  EncodeOutcome Encode(const Conversation& c, Scratch& scratch) const;

  // The tokens a model is prompted with to answer `c`: a trailing assistant message is
  // dropped (the model generates it), the rest rendered with add_generation_prompt=true
  // and tokenized. InvalidArgument when nothing but assistant messages remains, or for a
  // template or tokenizer failure (its message).
  Result<std::vector<uint32_t>> EncodePrompt(const Conversation& c, Scratch& scratch) const;

  const tokenizer::Tokenizer& tokenizer() const { return *tok_; }
  uint32_t end_of_turn() const { return eot_; }

 private:
  Result<std::string> Render(const Conversation& c, size_t count, bool generation_prompt) const;
  // Sets the mask of assistant message `i` of `c` in *mask for `ids`, the tokens of `text`
  // (a render of c.messages[:count]).
  // *ended: whether the span ended with the end-of-turn token.
  Status MaskTurn(const Conversation& c, size_t i, const std::string& text,
                  const std::vector<uint32_t>& ids, Scratch& scratch, std::vector<uint8_t>* mask,
                  bool* ended) const;
  // The token of `ids` where the rendering of assistant message `i` ends (see the top of this
  // file), or ids.size() when it cannot be told or the turn is the last message.
  size_t TurnEnd(const Conversation& c, size_t i, const std::string& text,
                 const std::vector<uint32_t>& ids, Scratch& scratch) const;
  Result<std::string> RenderMessages(const nlohmann::ordered_json& messages, const Conversation& c,
                                     bool generation_prompt) const;
  size_t TurnStart(const std::string& prompt, const std::string& text,
                   const std::vector<uint32_t>& ids, Scratch& scratch) const;
  void Finish(Example ex, EncodeOutcome* out) const;

  std::shared_ptr<const tokenizer::Tokenizer> tok_;
  chat_template::ChatTemplate template_;
  nlohmann::ordered_json special_;  // bos_token, eos_token, ... for the template
  uint32_t eot_ = 0;
  int64_t think_open_ = -1, think_close_ = -1;
  ChatEncodeOptions options_;
};

}  // namespace tandem::chat_data
