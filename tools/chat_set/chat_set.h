// `tandem data --model`: a chat JSONL file to a sharded binary set (actors/data/sharded_set.h)
// through ConvertChatFile (models/chat_data/convert.h), resumable after a kill. The set's
// manifest carries the conversion's resume state and the encoding options; `resume`
// continues after the last shard it lists, refusing other options or a changed input.
//
// Thread-safety: one call per output directory at a time.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "models/chat_data/convert.h"

namespace tandem::cli {

struct ChatSetOptions {
  chat_data::ConvertOptions convert;  // sink and resume_state are filled in here
  bool resume = false;
  // What decides the tokens (model directory, encode options): a resume must match it.
  std::string fingerprint;
  // Test seam: called with "shard_renamed" (a shard is in place, the manifest does not list
  // it yet) and "shard_recorded" (the manifest lists it), and the shard's index.
  std::function<void(std::string_view point, int64_t shard)> fault;
};

// Converts `input` into the sharded set `dir` and marks it complete. Errors: those of
// ConvertChatFile and ShardedSetWriter, and InvalidArgument for a resume whose options differ.
Result<chat_data::ConvertResult> WriteChatSet(const std::string& input, const std::string& dir,
                                              const chat_data::ChatEncoder& encoder,
                                              const ChatSetOptions& options);

}  // namespace tandem::cli
