// `tandem data --model DIR`: chat conversations (OpenAI or ShareGPT JSONL) to a sharded
// binary set of docs/data-format.md, tokenized with the model's tokenizer and chat template
// and loss-masked to the assistant turns (models/chat_data), resumable after a kill
// (--resume; tools/chat_set). Prints the summary; progress on stderr: a bar on a terminal,
// else a line every 10 seconds.
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
};

// Adds the chat options to the `data` subcommand.
void AddChatDataOptions(CLI::App* data, ChatDataArgs* args);

// Exit code 0 on success, 2 on bad usage or input that cannot be read.
int ChatData(const std::string& input, const std::string& output, const ChatDataArgs& args);

}  // namespace tandem::cli
