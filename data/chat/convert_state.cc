#include "data/chat/convert_state.h"

#include "runtime/core/json_parse.h"

#include <charconv>
#include <fstream>

#include <nlohmann/json.hpp>

namespace tandem::chat_data {
namespace {

using nlohmann::ordered_json;
constexpr int64_t kTailBytes = 4096;
constexpr int kStateVersion = 1;

const char* const kCountKeys[] = {"lines", "conversations", "examples", "tokens", "loss_tokens",
                                  "shards"};

template <typename R>  // ConvertResult or const ConvertResult
auto* CountField(R* r, std::string_view key) {
  if (key == "lines") return &r->lines;
  if (key == "conversations") return &r->conversations;
  if (key == "examples") return &r->examples;
  if (key == "tokens") return &r->tokens_out;
  if (key == "loss_tokens") return &r->loss_tokens;
  return &r->shards;
}

Status ReadCounts(const ordered_json& j, const char* key, std::map<std::string, int64_t>* out) {
  if (!j.contains(key)) return Status::Ok();
  if (!j[key].is_object()) return InvalidArgumentError("\"{}\" is not an object", key);
  for (const auto& [k, v] : j[key].items()) {
    if (!v.is_number_integer()) return InvalidArgumentError("\"{}.{}\" is not an integer", key, k);
    (*out)[k] = v.get<int64_t>();
  }
  return Status::Ok();
}

Status DecodeInto(const ordered_json& j, ConvertResult* r, InputPosition* at, InputIdentity* in) {
  if (!j.is_object()) return InvalidArgumentError("not a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() != kStateVersion) {
    return InvalidArgumentError("\"version\" is not {}", kStateVersion);
  }
  auto format = j.contains("format") && j["format"].is_string()
                    ? ParseChatFormat(j["format"].get<std::string>())
                    : Result<ChatFormat>(InvalidArgumentError("no format"));
  if (!format.ok() || *format == ChatFormat::kAuto) {
    return InvalidArgumentError("\"format\" is not \"openai\" or \"sharegpt\"");
  }
  r->format = *format;
  for (const char* key : {"byte", "line", "input_bytes"}) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
      return InvalidArgumentError("\"{}\" is not a non-negative integer", key);
    }
  }
  at->byte = j["byte"].get<int64_t>();
  at->line = j["line"].get<int64_t>();
  in->size = j["input_bytes"].get<int64_t>();
  if (!j.contains("tail_hash") || !j["tail_hash"].is_string()) {
    return InvalidArgumentError("\"tail_hash\" is not a string");
  }
  const std::string hash = j["tail_hash"].get<std::string>();
  auto [end, ec] = std::from_chars(hash.data(), hash.data() + hash.size(), in->tail_hash, 16);
  if (ec != std::errc() || end != hash.data() + hash.size()) {
    return InvalidArgumentError("\"tail_hash\" is not hexadecimal");
  }
  for (const char* key : kCountKeys) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
      return InvalidArgumentError("\"{}\" is not a non-negative integer", key);
    }
    *CountField(r, key) = j[key].get<int64_t>();
  }
  RETURN_IF_ERROR(ReadCounts(j, "bad", &r->bad));
  RETURN_IF_ERROR(ReadCounts(j, "events", &r->events));
  RETURN_IF_ERROR(ReadCounts(j, "warnings", &r->warnings));
  if (j.contains("bad_examples") && j["bad_examples"].is_array()) {
    for (const auto& e : j["bad_examples"]) {
      if (e.is_string()) r->bad_examples.push_back(e.get<std::string>());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<uint64_t> TailHash(const std::string& path, int64_t byte) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: cannot open the chat file", path);
  const int64_t from = std::max<int64_t>(0, byte - kTailBytes);
  std::string buf(size_t(byte - from), '\0');
  in.seekg(from);
  in.read(buf.data(), std::streamsize(buf.size()));
  if (in.gcount() != std::streamsize(buf.size())) {
    return NotFoundError("{}: shorter than {} bytes", path, byte);
  }
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : buf) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string EncodeState(const ConvertResult& r, const InputPosition& at,
                        const InputIdentity& input) {
  ordered_json j;
  j["version"] = kStateVersion;
  j["format"] = ChatFormatName(r.format);
  j["byte"] = at.byte;
  j["line"] = at.line;
  j["input_bytes"] = input.size;
  j["tail_hash"] = fmt::format("{:016x}", input.tail_hash);
  for (const char* key : kCountKeys) j[key] = *CountField(&r, key);
  j["bad"] = r.bad;
  j["events"] = r.events;
  j["warnings"] = r.warnings;
  j["bad_examples"] = r.bad_examples;
  return j.dump();
}

Status DecodeState(const std::string& json, const std::string& origin, ConvertResult* counts,
                   InputPosition* at, InputIdentity* input) {
  Result<ordered_json> j = ParseOrderedJson(json, "state");
  Status st = !j.ok() ? j.status() : DecodeInto(*j, counts, at, input);
  if (!st.ok()) {
    return DataLossError("{}: the resume state is malformed: {}", origin, st.message());
  }
  return Status::Ok();
}

}  // namespace tandem::chat_data
