// `tandem data --model`: a chat JSONL file to a sharded binary set (data/corpus/sharded_set.h)
// through ConvertChatFile (data/chat/convert.h), resumable after a kill. The set's
// manifest carries the conversion's resume state and the settings that decide the set
// (`settings`, plus the shard bound, format, vocab and skip_bad of `convert`); `resume`
// continues after the last shard it lists, refusing a changed input or any setting that
// differs, with the setting's value then and now.
//
// Thread-safety: one call per output directory at a time.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat/convert.h"

namespace tandem::chat_data {

// One setting that decides the examples, as the user gave it: {"--model", "/m/qwen3"}.
struct ChatSetting {
  std::string name;
  std::string value;
};

struct ChatSetOptions {
  chat_data::ConvertOptions convert;  // sink and resume_state are filled in here
  bool resume = false;
  // What decides the tokens (model directory, tokenizer files' digest, encode options); the
  // layout settings of `convert` are added by WriteChatSet. A resume must match every one.
  std::vector<ChatSetting> settings;
  // Test seam: called with "shard_renamed" (a shard is in place, the manifest does not list
  // it yet) and "shard_recorded" (the manifest lists it), and the shard's index.
  std::function<void(std::string_view point, int64_t shard)> fault{};
};

// Converts `input` into the sharded set `dir` and marks it complete. Errors: those of
// ConvertChatFile and ShardedSetWriter, InvalidArgument for a resume whose settings differ
// (naming each one that does, with its value when the conversion began and now), and
// InvalidArgument when the input gives no example. A new conversion that ends with a bad
// line (no skip_bad) or no example removes the set it began, so a rerun is not blocked.
Result<chat_data::ConvertResult> WriteChatSet(const std::string& input, const std::string& dir,
                                              const chat_data::ChatEncoder& encoder,
                                              const ChatSetOptions& options);

}  // namespace tandem::chat_data
