// `tandem data`: the data command of the CLI, built as its own library on data/ (no actors,
// kernels or models linked in).
//   tandem data FILE.jsonl [-o DIR]: pre-tokenized JSONL to a binary set of
//     docs/data-format.md, or a set validated and counted (data/corpus/data_command.h).
//   tandem data CHATS.jsonl --model DIR [-o DIR]: chat conversations (OpenAI or ShareGPT
//     JSONL) to a sharded binary set, tokenized with the model's tokenizer and chat template
//     and loss-masked to the assistant turns (data/chat), resumable after a kill (--resume;
//     data/chat/chat_set.h). Prints the summary; progress on stderr: a bar on a terminal,
//     else a line every 10 seconds.
//
// Thread-safety: called from main() only.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace tandem::cli {

struct ChatDataArgs {
  std::string model;          // --model DIR: tokenizer.json + tokenizer_config.json
  std::string format = "auto";
  std::string turns = "all";  // all | last
  bool no_reasoning = false;
  std::string split_turns = "auto";
  std::string enable_thinking;  // "", "true", "false"
  int64_t max_tokens = 0;
  std::string overlong = "truncate";
  int threads = 0;
  int64_t shard_tokens = int64_t{1} << 26;  // --shard-tokens
  bool resume = false;                      // --resume
  int64_t vocab = 0;                        // --vocab (shared with the JSONL path)
  bool skip_bad = false;                    // --skip-bad (shared with the JSONL path)
  int64_t max_line_bytes = int64_t{4} << 20;  // --max-line-bytes
  int64_t max_turns = 512;                    // --max-turns
};

// Adds the chat options to the `data` subcommand.
void AddChatDataOptions(CLI::App* data, ChatDataArgs* args);

// `tandem data` without --model: 0 when the input is valid (and converted), 2 when it is not.
int Data(const std::string& input, const std::string& output, int64_t vocab, bool skip_bad);

// `tandem data --model`: exit code 0 on success, 2 on bad usage or input that cannot be read.
int ChatData(const std::string& input, const std::string& output, const ChatDataArgs& args);

}  // namespace tandem::cli
