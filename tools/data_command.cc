#include "tools/data_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>

#include "data/chat/chat_set.h"
#include "data/chat/convert.h"
#include "data/corpus/data_command.h"
#include "data/corpus/sharded_set.h"
#include "models/io/file_digest.h"

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
  std::fprintf(stderr, "\r\033[K[%s%s] %5.1f%%  %.1f / %.1f MB",
               std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), 100 * f, double(done) / 1e6,
               double(total) / 1e6);
  if (done >= total) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

// Not a terminal (a log): one line every 10 seconds, with the rate since the start.
std::function<void(int64_t, int64_t)> ProgressLines() {
  using Clock = std::chrono::steady_clock;
  struct State {
    Clock::time_point start = Clock::now(), last = Clock::now();
    int64_t first = -1;
  };
  auto st = std::make_shared<State>();
  return [st](int64_t done, int64_t total) {
    const auto now = Clock::now();
    if (st->first < 0) st->first = done;
    if (now - st->last < std::chrono::seconds(10) || done >= total) return;
    st->last = now;
    const double s = std::chrono::duration<double>(now - st->start).count();
    std::fprintf(stderr, "tandem data: %.1f%% (%.1f of %.1f MB, %.1f MB/s)\n",
                 total > 0 ? 100.0 * double(done) / double(total) : 100.0, double(done) / 1e6,
                 double(total) / 1e6, double(done - st->first) / 1e6 / s);
  };
}

// A digest of the tokenizer files the examples come from: a model directory whose files were
// replaced between a kill and --resume would mix two tokenizations in one set.
std::string TokenizerDigest(const std::string& model) {
  std::string out;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    auto d = models::FileXxh3(model + "/" + name);
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name,
                       d.ok() ? fmt::format("xxh3 {:016x}", *d) : std::string("unreadable"));
  }
  return out;
}

// What decides the examples besides the layout settings WriteChatSet records itself: a resume
// must be given the same.
std::vector<chat_data::ChatSetting> Settings(const ChatDataArgs& a) {
  std::error_code ec;
  const auto model = std::filesystem::weakly_canonical(a.model, ec);
  return {{"--model", ec ? a.model : model.string()},
          {"tokenizer files", TokenizerDigest(a.model)},
          {"--turns", a.turns},
          {"--no-reasoning", a.no_reasoning ? "true" : "false"},
          {"--split-turns", a.split_turns},
          {"--enable-thinking", a.enable_thinking.empty() ? "unset" : a.enable_thinking},
          {"--max-tokens", std::to_string(a.max_tokens)},
          {"--overlong", a.overlong}};
}

}  // namespace

int Data(const std::string& input, const std::string& output, int64_t vocab, bool skip_bad) {
  data::DataCommandOptions o;
  o.input = input;
  o.output = output;
  o.vocab = vocab;
  o.skip_bad = skip_bad;
  Status st = data::RunDataCommand(o);
  if (st.ok()) return 0;
  std::fprintf(stderr, "tandem data: %s\n", st.ToString().c_str());
  return 2;
}

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
  data->add_option("--shard-tokens", a->shard_tokens,
                   "chat JSONL: tokens per output shard at most (a longer conversation is a "
                   "shard alone)");
  data->add_option("--max-line-bytes", a->max_line_bytes,
                   "chat JSONL: longer lines are bad lines, skipped unparsed (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  data->add_option("--max-turns", a->max_turns,
                   "chat JSONL: conversations of more messages are bad lines (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  data->add_flag("--resume", a->resume,
                 "chat JSONL: continue an interrupted conversion after its last complete shard");
}

int ChatData(const std::string& input, const std::string& output, const ChatDataArgs& args) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "tandem data: %s\n", st.ToString().c_str());
    return 2;
  };
  auto options = EncodeOptions(args);
  if (!options.ok()) return fail(options.status());
  if (args.vocab < 0) return fail(InvalidArgumentError("--vocab must be >= 0, got {}", args.vocab));
  if (args.shard_tokens <= 0) {
    return fail(InvalidArgumentError("--shard-tokens must be positive, got {}", args.shard_tokens));
  }
  if (args.resume && output.empty()) {
    return fail(InvalidArgumentError("--resume needs the output directory (-o) to continue"));
  }
  auto encoder = chat_data::ChatEncoder::Load(args.model, *options);
  if (!encoder.ok()) return fail(encoder.status());
  chat_data::ConvertOptions co;
  co.format = *chat_data::ParseChatFormat(args.format);
  co.threads = args.threads;
  co.skip_bad = args.skip_bad;
  co.vocab = args.vocab;
  co.vocab_origin = args.vocab > 0 ? "--vocab" : "";
  co.shard_tokens = args.shard_tokens;
  co.max_line_bytes = args.max_line_bytes;
  co.max_turns = args.max_turns;
  co.progress = ::isatty(STDERR_FILENO) ? ProgressBar : ProgressLines();
  auto run = [&]() -> Result<chat_data::ConvertResult> {
    if (output.empty()) {
      co.sink = [](chat_data::ExampleShard) { return Status::Ok(); };  // count only
      return chat_data::ConvertChatFile(input, *encoder, co);
    }
    chat_data::ChatSetOptions so{.convert = co, .resume = args.resume, .settings = Settings(args)};
    return chat_data::WriteChatSet(input, output, *encoder, so);
  };
  Result<chat_data::ConvertResult> result = run();
  if (!result.ok()) return fail(result.status());
  std::printf("%s", result->Summary().c_str());
  if (result->examples == 0) return fail(InvalidArgumentError("{}: no examples to write", input));
  if (!output.empty()) {
    auto back = data::OpenShardedSet(output, data::BinaryCheck::kFull);
    if (!back.ok()) return fail(back.status());
    std::printf("wrote %s\n", back->Summary().c_str());
  }
  return 0;
}

}  // namespace tandem::cli
