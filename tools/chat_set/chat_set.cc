#include "tools/chat_set/chat_set.h"

#include <nlohmann/json.hpp>

#include "actors/data/sharded_set.h"

namespace tandem::cli {
namespace {

using nlohmann::ordered_json;

// The manifest's producer state: {"fingerprint": ..., "convert": <ConvertChatFile state>}.
std::string ProducerState(const std::string& fingerprint, const std::string& convert_state) {
  ordered_json j;
  j["fingerprint"] = fingerprint;
  j["convert"] = ordered_json::parse(convert_state.empty() ? "{}" : convert_state);
  return j.dump();
}

// The convert state to resume from; InvalidArgument when the options differ.
Result<std::string> ResumeState(const std::string& dir, const data::ShardManifest& m,
                                const std::string& fingerprint) {
  const ordered_json j = ordered_json::parse(m.producer_state, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("fingerprint") ||
      !j["fingerprint"].is_string() || !j.contains("convert") || !j["convert"].is_object()) {
    return InvalidArgumentError("{}/shards.json: \"producer\" is not a chat conversion's state",
                                dir);
  }
  if (j["fingerprint"].get<std::string>() != fingerprint) {
    return InvalidArgumentError(
        "{}: the conversion began with other options ({}); resume with the same options "
        "({} now), or start again without --resume",
        dir, j["fingerprint"].get<std::string>(), fingerprint);
  }
  // A kill before the first shard leaves an empty state: start from the beginning.
  return j["convert"].empty() ? std::string() : j["convert"].dump();
}

}  // namespace

Result<chat_data::ConvertResult> WriteChatSet(const std::string& input, const std::string& dir,
                                              const chat_data::ChatEncoder& encoder,
                                              const ChatSetOptions& options) {
  chat_data::ConvertOptions co = options.convert;
  Result<data::ShardedSetWriter> writer =
      options.resume ? data::ShardedSetWriter::Resume(dir)
                     : data::ShardedSetWriter::Create(dir, ProducerState(options.fingerprint, ""));
  if (!writer.ok()) return writer.status();
  if (options.resume) {
    ASSIGN_OR_RETURN(co.resume_state, ResumeState(dir, writer->manifest(), options.fingerprint));
  }
  writer->set_fault_hook([&](std::string_view point) {
    if (options.fault) options.fault(point, int64_t(writer->manifest().shards.size()));
  });
  co.sink = [&](chat_data::ExampleShard shard) -> Status {
    data::Corpus c = data::Corpus::FromVectors(std::move(shard.tokens), std::move(shard.offsets),
                                               std::move(shard.mask), input);
    RETURN_IF_ERROR(writer->AddShard(c, ProducerState(options.fingerprint, shard.state)));
    if (options.fault) options.fault("shard_recorded", int64_t(writer->manifest().shards.size()) - 1);
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(chat_data::ConvertResult r, chat_data::ConvertChatFile(input, encoder, co));
  RETURN_IF_ERROR(writer->Finish(ProducerState(options.fingerprint, r.final_state)));
  return r;
}

}  // namespace tandem::cli
