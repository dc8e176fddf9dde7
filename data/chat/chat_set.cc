#include "data/chat/chat_set.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "data/corpus/sharded_set.h"
#include "runtime/core/json_parse.h"

namespace tandem::chat_data {
namespace {

using nlohmann::ordered_json;

// Every setting that decides the set: the caller's, then the layout ones of `convert`.
std::vector<ChatSetting> AllSettings(const ChatSetOptions& o) {
  std::vector<ChatSetting> all = o.settings;
  all.push_back({"--shard-tokens", std::to_string(o.convert.shard_tokens)});
  all.push_back({"--format", chat_data::ChatFormatName(o.convert.format)});
  all.push_back({"--vocab", std::to_string(o.convert.vocab)});
  all.push_back({"--skip-bad", o.convert.skip_bad ? "true" : "false"});
  all.push_back({"--max-line-bytes", std::to_string(o.convert.max_line_bytes)});
  all.push_back({"--max-turns", std::to_string(o.convert.max_turns)});
  return all;
}

// The manifest's producer state: {"settings": {name: value...}, "convert": <ConvertChatFile
// state>}.
std::string ProducerState(const std::vector<ChatSetting>& settings,
                          const std::string& convert_state) {
  ordered_json j;
  j["settings"] = ordered_json::object();
  for (const ChatSetting& s : settings) j["settings"][s.name] = s.value;
  Result<ordered_json> convert =
      ParseOrderedJson(convert_state.empty() ? "{}" : convert_state, "convert state");
  // The state is EncodeState's own output; anything else is a bug here, not bad input.
  TANDEM_CHECK_MSG(convert.ok(), "{}", convert.status().message());
  j["convert"] = std::move(*convert);
  return j.dump();
}

// The convert state to resume from; InvalidArgument naming every setting that differs.
Result<std::string> ResumeState(const std::string& dir, const data::ShardManifest& m,
                                const std::vector<ChatSetting>& now) {
  Result<ordered_json> parsed = ParseOrderedJson(m.producer_state, dir + "/shards.json producer");
  if (!parsed.ok()) return parsed.status();
  const ordered_json& j = *parsed;
  if (!j.is_object() || !j.contains("settings") ||
      !j["settings"].is_object() || !j.contains("convert") || !j["convert"].is_object()) {
    return InvalidArgumentError(
        "{}/shards.json: \"producer\" is not a chat conversion's state with its settings (an "
        "older tandem's, or another tool's); start again without --resume",
        dir);
  }
  const ordered_json& then = j["settings"];
  std::vector<std::string> diffs;
  for (const ChatSetting& s : now) {
    const std::string was = then.contains(s.name) && then[s.name].is_string()
                                ? then[s.name].get<std::string>()
                                : "(not recorded)";
    if (was != s.value) diffs.push_back(fmt::format("{} was {}, now {}", s.name, was, s.value));
  }
  for (const auto& [name, value] : then.items()) {
    bool given = false;
    for (const ChatSetting& s : now) given = given || s.name == name;
    if (!given) diffs.push_back(fmt::format("{} was {}, now not given", name, DescribeJson(value)));
  }
  if (!diffs.empty()) {
    return InvalidArgumentError(
        "{}: the conversion began with other settings ({}); resume with the same ones, or "
        "start again without --resume",
        dir, fmt::join(diffs, "; "));
  }
  // A kill before the first shard leaves an empty state: start from the beginning.
  return j["convert"].empty() ? std::string() : j["convert"].dump();
}

}  // namespace

Result<chat_data::ConvertResult> WriteChatSet(const std::string& input, const std::string& dir,
                                              const chat_data::ChatEncoder& encoder,
                                              const ChatSetOptions& options) {
  chat_data::ConvertOptions co = options.convert;
  const std::vector<ChatSetting> settings = AllSettings(options);
  Result<data::ShardedSetWriter> writer =
      options.resume ? data::ShardedSetWriter::Resume(dir)
                     : data::ShardedSetWriter::Create(dir, ProducerState(settings, ""));
  if (!writer.ok()) return writer.status();
  if (options.resume) {
    ASSIGN_OR_RETURN(co.resume_state, ResumeState(dir, writer->manifest(), settings));
  }
  writer->set_fault_hook([&](std::string_view point) {
    if (options.fault) options.fault(point, int64_t(writer->manifest().shards.size()));
  });
  co.sink = [&](chat_data::ExampleShard shard) -> Status {
    data::Corpus c = data::Corpus::FromVectors(std::move(shard.tokens), std::move(shard.offsets),
                                               std::move(shard.mask), input);
    RETURN_IF_ERROR(writer->AddShard(c, ProducerState(settings, shard.state)));
    if (options.fault) options.fault("shard_recorded", int64_t(writer->manifest().shards.size()) - 1);
    return Status::Ok();
  };
  Result<chat_data::ConvertResult> r = chat_data::ConvertChatFile(input, encoder, co);
  // A new set that cannot be completed is removed, so the rerun starts afresh instead of
  // having to resume or remove it: a line refused without --skip-bad (the same line would
  // stop a resume), or an input with no examples at all. A sink's failure (disk full) or a
  // resumed set keeps its shards for --resume.
  const bool refused = !r.ok() && r.status().code() == StatusCode::kInvalidArgument;
  if (!options.resume && (refused || (r.ok() && r->examples == 0))) {
    RETURN_IF_ERROR(writer->Discard());
    if (!r.ok()) return r.status();
    return InvalidArgumentError("{}: no examples to write ({} lines, none usable{}); {} not written",
                                input, r->lines,
                                r->bad_examples.empty() ? "" : "; first: " + r->bad_examples[0],
                                dir);
  }
  if (!r.ok()) return r.status();
  RETURN_IF_ERROR(writer->Finish(ProducerState(settings, r->final_state)));
  return r;
}

}  // namespace tandem::chat_data
