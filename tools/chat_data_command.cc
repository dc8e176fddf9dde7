#include "tools/chat_data_command.h"

#include <unistd.h>

#include <cstdio>

#include <CLI/CLI.hpp>

#include "actors/data/corpus.h"
#include "models/chat_data/convert.h"

namespace tandem::cli {
namespace {

Result<chat_data::ChatEncodeOptions> EncodeOptions(const ChatDataArgs& a) {
  chat_data::ChatEncodeOptions o;
  o.last_turn_only = a.turns == "last";
  o.train_reasoning = !a.no_reasoning;
  o.split_turns = a.split_turns == "on"    ? chat_data::SplitTurns::kOn
                  : a.split_turns == "off" ? chat_data::SplitTurns::kOff
                                           : chat_data::SplitTurns::kAuto;
  if (!a.enable_thinking.empty()) o.enable_thinking = a.enable_thinking == "true";
  if (a.max_tokens < 0) return InvalidArgumentError("--max-tokens must be >= 0");
  o.max_tokens = a.max_tokens;
  o.drop_overlong = a.overlong == "drop";
  return o;
}

void ProgressBar(int64_t done, int64_t total) {
  const double f = total > 0 ? double(done) / double(total) : 1.0;
  const int width = 30, filled = int(f * width);
  std::fprintf(stderr, "\r\033[K[%s%s] %5.1f%%  %.1f / %.1f MB", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), 100 * f, double(done) / 1e6,
               double(total) / 1e6);
  if (done >= total) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace

void AddChatDataOptions(CLI::App* data, ChatDataArgs* a) {
  data->add_option("--model", a->model,
                   "chat JSONL: model directory with tokenizer.json and tokenizer_config.json");
  data->add_option("--format", a->format, "chat JSONL format")
      ->check(CLI::IsMember({"auto", "openai", "sharegpt"}));
  data->add_option("--turns", a->turns, "assistant turns trained on")
      ->check(CLI::IsMember({"all", "last"}));
  data->add_flag("--no-reasoning", a->no_reasoning, "no loss on <think>...</think>");
  data->add_option("--split-turns", a->split_turns,
                   "one example per assistant turn (auto: when earlier turns have reasoning)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  data->add_option("--enable-thinking", a->enable_thinking, "passed to the chat template")
      ->check(CLI::IsMember({"true", "false"}));
  data->add_option("--max-tokens", a->max_tokens, "longest example (0: no limit)");
  data->add_option("--overlong", a->overlong, "longer examples are truncated or dropped")
      ->check(CLI::IsMember({"truncate", "drop"}));
  data->add_option("--threads", a->threads, "worker threads (0: all cores)");
}

int ChatData(const std::string& input, const std::string& output, const ChatDataArgs& args) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "tandem data: %s\n", st.ToString().c_str());
    return 2;
  };
  auto options = EncodeOptions(args);
  if (!options.ok()) return fail(options.status());
  auto encoder = chat_data::ChatEncoder::Load(args.model, *options);
  if (!encoder.ok()) return fail(encoder.status());
  chat_data::ConvertOptions co;
  co.format = *chat_data::ParseChatFormat(args.format);
  co.threads = args.threads;
  if (::isatty(STDERR_FILENO)) co.progress = ProgressBar;
  auto result = chat_data::ConvertChatFile(input, *encoder, co);
  if (!result.ok()) return fail(result.status());
  std::printf("%s", result->Summary().c_str());
  if (result->offsets.size() < 2) return fail(InvalidArgumentError("{}: no examples to write", input));
  if (!output.empty()) {
    data::Corpus corpus = data::Corpus::FromVectors(std::move(result->tokens),
                                                    std::move(result->offsets),
                                                    std::move(result->mask), input);
    if (Status st = data::WriteBinary(corpus, output); !st.ok()) return fail(st);
    auto back = data::OpenBinary(output, data::BinaryCheck::kFull);
    if (!back.ok()) return fail(back.status());
    std::printf("wrote %s\n", back->Summary().c_str());
  }
  return 0;
}

}  // namespace tandem::cli
