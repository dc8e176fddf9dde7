// Converts a chat JSONL file into packed training examples on all cores. The file is streamed
// in batches (its size does not bound memory): lines are parsed (format given or detected
// from the file's first conversation), encoded by a ChatEncoder, and emitted in file order.
// Bad lines are counted by reason with their line numbers; nothing in the input can crash
// the conversion.
//
// Output goes to a sink in shards of bounded size: a shard closes before a conversation
// whose examples would take it past `shard_tokens` (a conversation longer than that is a
// shard alone), so shards end on line boundaries. With each shard comes the resume state: the
// counts so far and where in the input the shard ends, as JSON text. Given that state back
// (`resume_state`), a later run reads the input from that point and continues the counts, so
// a killed conversion resumed after its last written shard gives the same shards and summary
// as an uninterrupted one. The state also pins the input (its size and the bytes before the
// resume point): resuming on a changed file is an error. Without a sink the examples are
// kept in memory in the result (tests, benchmarks).
//
// Thread-safety: ConvertChatFile runs its own worker threads; `progress` is called on the
// calling thread, `sink` on a writer thread (one call at a time, in shard order), so writing
// a shard overlaps encoding the next.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "data/chat/chat_encoder.h"

namespace tandem::chat_data {

// A shard of examples, concatenated: documents == offsets.size() - 1.
struct ExampleShard {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> mask;
  std::string state;  // resume state after this shard (JSON)
};

struct ConvertOptions {
  ChatFormat format = ChatFormat::kAuto;
  int threads = 0;  // 0: all hardware threads
  // A bad line (malformed, or one the template or tokenizer rejects, or with an id not below
  // `vocab`) is counted and skipped; false: the first one is an InvalidArgument error
  // "path:line: what (reason)".
  bool skip_bad = true;
  int64_t vocab = 0;  // > 0: every id of an example must be below it (reason id_out_of_range)
  // A line longer than this many bytes (newline excluded) is a bad line (line_too_long),
  // read past without being kept whole, parsed or tokenized: memory stays within about
  // 2 * batch_bytes + max_line_bytes whatever the file holds. 0: no limit.
  int64_t max_line_bytes = int64_t{4} << 20;
  // A conversation of more messages than this is a bad line (too_many_turns): the masks
  // render the conversation once per assistant turn, so the cost grows with the square of
  // its turns. 0: no limit.
  int64_t max_turns = 512;
  std::string vocab_origin;  // where `vocab` came from, for messages ("--vocab")
  // Called now and then with (bytes done, bytes total) of the whole file, and once at the end.
  std::function<void(int64_t, int64_t)> progress;
  // Where shards go; null: kept in ConvertResult::tokens/offsets/mask (one shard).
  std::function<Status(ExampleShard)> sink;
  int64_t shard_tokens = int64_t{1} << 26;  // with a sink: the shard size bound
  std::string resume_state;                 // empty: from the start
  int64_t batch_bytes = int64_t{32} << 20;  // input read and encoded at a time
};

struct ConvertResult {
  ChatFormat format = ChatFormat::kAuto;
  // Counts over the whole file (a resumed run includes what was done before it).
  int64_t lines = 0;            // non-blank lines
  int64_t conversations = 0;    // lines that parsed as conversations
  int64_t examples = 0;
  int64_t tokens_out = 0;
  int64_t loss_tokens = 0;
  int64_t shards = 0;           // shards given to the sink, this run and before
  std::map<std::string, int64_t> bad;     // reason -> lines
  std::vector<std::string> bad_examples;  // first few "path:line: message"
  std::map<std::string, int64_t> events;  // from ChatEncoder (too_long, truncated, ...)
  std::map<std::string, int64_t> warnings;  // from ChatEncoder (no_end_token): spans kept
  // This run: where it started (resumed) and how much it read.
  int64_t start_line = 0;
  int64_t start_byte = 0;
  int64_t bytes = 0;
  double seconds = 0;
  std::string final_state;  // resume state at the end of the file
  // Without a sink: the examples, concatenated (offsets.size() - 1 == examples).
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> mask;

  // The summary printed by `tandem data`.
  std::string Summary() const;
};

// NotFound when `path` cannot be read; InvalidArgument when no line has a known format
// under kAuto, when `resume_state` is malformed or does not fit the file, or for the first
// bad line without skip_bad; a sink's error stops the conversion and is returned.
Result<ConvertResult> ConvertChatFile(const std::string& path, const ChatEncoder& encoder,
                                      const ConvertOptions& options);

}  // namespace tandem::chat_data
