// Converts a chat JSONL file into packed training examples on all cores: lines are parsed
// (format given or detected from the file's first conversation), encoded by a ChatEncoder,
// and concatenated in file order. Bad lines are counted by reason with their line numbers;
// nothing in the input can crash the conversion.
//
// Thread-safety: ConvertChatFile runs its own worker threads; `progress` is called on the
// calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/chat_data/chat_encoder.h"

namespace tandem::chat_data {

struct ConvertOptions {
  ChatFormat format = ChatFormat::kAuto;
  int threads = 0;  // 0: all hardware threads
  // Called now and then with (bytes done, bytes total), and once at the end.
  std::function<void(int64_t, int64_t)> progress;
};

struct ConvertResult {
  ChatFormat format = ChatFormat::kAuto;
  int64_t lines = 0;            // non-blank lines
  int64_t conversations = 0;    // lines that parsed as conversations
  int64_t bytes = 0;
  double seconds = 0;
  std::map<std::string, int64_t> bad;     // reason -> lines
  std::vector<std::string> bad_examples;  // first few "path:line: message"
  std::map<std::string, int64_t> events;  // from ChatEncoder (too_long, truncated, ...)
  // The examples, concatenated: documents() == offsets.size() - 1.
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> mask;
  int64_t loss_tokens = 0;

  // The summary printed by `tandem data`.
  std::string Summary() const;
};

// NotFound when `path` cannot be read; InvalidArgument when no line has a known format
// under kAuto. Bad lines are not errors.
Result<ConvertResult> ConvertChatFile(const std::string& path, const ChatEncoder& encoder,
                                      const ConvertOptions& options);

}  // namespace tandem::chat_data
