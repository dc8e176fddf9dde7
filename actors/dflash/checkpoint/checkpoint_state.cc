#include "actors/dflash/checkpoint/checkpoint_state.h"

#include <charconv>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/io/file_digest.h"
#include "models/io/file_util.h"
#include "runtime/core/file_sync.h"
#include "runtime/core/json_parse.h"

namespace tandem::dflash {
namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "tandem-dflash-job";
constexpr int64_t kVersion = 2;
constexpr const char* kStateFile = "tandem_state.json";

// Field-by-field reading of one JSON object: every error is DataLoss naming the file and the
// field's path ("runs/x/step_00000020/tandem_state.json: field 'positions.0.epoch': ...").
class Fields {
 public:
  Fields(const json& obj, const std::string& file, std::string prefix)
      : obj_(obj), file_(file), prefix_(std::move(prefix)) {}

  std::string Name(std::string_view key) const { return prefix_ + std::string(key); }
  Status Error(std::string_view key, const std::string& what) const {
    return DataLossError("{}: field '{}': {}", file_, Name(key), what);
  }
  const json* Find(std::string_view key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  Result<const json*> Require(std::string_view key) const {
    const json* v = Find(key);
    if (v == nullptr) return Error(key, "missing");
    return v;
  }
  // An integer in [lo, hi] (a float such as 1e30 or 20.0 is not an integer).
  Result<int64_t> Int(std::string_view key, int64_t lo, int64_t hi) const {
    ASSIGN_OR_RETURN(const json* v, Require(key));
    return CheckInt(key, *v, lo, hi);
  }
  Result<int64_t> CheckInt(std::string_view key, const json& v, int64_t lo, int64_t hi) const {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo) {
        return static_cast<int64_t>(u);
      }
    } else if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if (i >= lo && i <= hi) return i;
    } else {
      return Error(key, fmt::format("expected an integer, got {} {}", v.type_name(),
                                    Excerpt(v)));
    }
    return Error(key, fmt::format("{} is outside [{}, {}]", DescribeJson(v), lo, hi));
  }
  Result<std::string> String(std::string_view key) const {
    ASSIGN_OR_RETURN(const json* v, Require(key));
    if (!v->is_string()) {
      return Error(key, fmt::format("expected a string, got {} {}", v->type_name(), Excerpt(*v)));
    }
    return v->get<std::string>();
  }
  Result<const json*> Object(std::string_view key) const {
    ASSIGN_OR_RETURN(const json* v, Require(key));
    if (!v->is_object()) return Error(key, fmt::format("expected an object, got {}", v->type_name()));
    return v;
  }
  // Fields other than `known` are an error (a misspelt hand edit must not pass unnoticed).
  Status OnlyKnown(std::initializer_list<std::string_view> known) const {
    for (const auto& [k, unused] : obj_.items()) {
      bool ok = false;
      for (std::string_view n : known) ok |= k == n;
      if (!ok) return Error(k, "unknown field");
    }
    return Status::Ok();
  }
  static std::string Excerpt(const json& v) {
    return DescribeJson(v, 40);
  }

 private:
  const json& obj_;
  const std::string& file_;
  std::string prefix_;
};

// `s` for a message: at most 40 bytes, anything but printable ASCII as \xNN.
std::string Printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return s.size() > 40 ? out + "..." : out;
}

// A whole decimal number without sign, spaces or leading zeros, in [0, max].
std::optional<int64_t> Decimal(std::string_view s, int64_t max) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

std::optional<uint64_t> Hex64(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<RunIdentity> ParseIdentity(const json& j, const std::string& file) {
  Fields f(j, file, "identity.");
  RETURN_IF_ERROR(f.OnlyKnown({"seed", "target_model", "target_layer_ids", "target_replicas",
                               "max_tokens", "data"}));
  RunIdentity id;
  ASSIGN_OR_RETURN(const json* seed, f.Require("seed"));
  if (!seed->is_number_unsigned() && !(seed->is_number_integer() && seed->get<int64_t>() >= 0)) {
    return f.Error("seed", fmt::format("expected an integer >= 0, got {}", Fields::Excerpt(*seed)));
  }
  id.seed = seed->get<uint64_t>();
  ASSIGN_OR_RETURN(id.target_model, f.String("target_model"));
  ASSIGN_OR_RETURN(const json* layers, f.Require("target_layer_ids"));
  if (!layers->is_array() || layers->size() > 4096) {
    return f.Error("target_layer_ids", "expected an array of at most 4096 layer ids");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    ASSIGN_OR_RETURN(int64_t l, f.CheckInt(fmt::format("target_layer_ids[{}]", i), (*layers)[i],
                                           0, 1 << 20));
    id.target_layer_ids.push_back(l);
  }
  ASSIGN_OR_RETURN(id.target_replicas, f.Int("target_replicas", 1, kMaxStateReplicas));
  ASSIGN_OR_RETURN(id.max_tokens, f.Int("max_tokens", 1, int64_t{1} << 31));
  ASSIGN_OR_RETURN(id.data, f.String("data"));
  return id;
}

Status ParsePositions(const json& j, const std::string& file, ResumeState* st) {
  for (const auto& [k, v] : j.items()) {
    Fields f(j, file, "positions.");
    std::optional<int64_t> r = Decimal(k, kMaxStateReplicas - 1);
    if (!r) {
      return f.Error(k, fmt::format("'{}' is not a target replica number in [0, {})",
                                    Printable(k), kMaxStateReplicas));
    }
    if (!v.is_object()) return f.Error(k, fmt::format("expected an object, got {}", v.type_name()));
    Fields p(v, file, fmt::format("positions.{}.", k));
    RETURN_IF_ERROR(p.OnlyKnown({"epoch", "next_batch"}));
    data::DataPosition pos;
    ASSIGN_OR_RETURN(pos.epoch, p.Int("epoch", 0, kMaxStateCount));
    ASSIGN_OR_RETURN(pos.next_batch, p.Int("next_batch", 0, kMaxStateCount));
    st->positions[static_cast<int>(*r)] = pos;
  }
  return Status::Ok();
}

Status ParseFiles(const json& j, const std::string& file, ResumeState* st) {
  for (const auto& [k, v] : j.items()) {
    Fields f(j, file, "files.");
    if (k.empty() || k == "." || k == ".." || k == kStateFile ||
        k.find_first_of("/\\") != std::string::npos || k.find('\0') != std::string::npos) {
      return f.Error(Printable(k), "not a file name inside the step directory");
    }
    if (!v.is_object()) return f.Error(k, fmt::format("expected an object, got {}", v.type_name()));
    Fields d(v, file, fmt::format("files.{}.", k));
    RETURN_IF_ERROR(d.OnlyKnown({"bytes", "xxh3_64"}));
    FileDigest digest;
    ASSIGN_OR_RETURN(int64_t bytes, d.Int("bytes", 0, INT64_MAX));
    digest.bytes = static_cast<uint64_t>(bytes);
    ASSIGN_OR_RETURN(std::string hex, d.String("xxh3_64"));
    std::optional<uint64_t> h = Hex64(hex);
    if (!h) return d.Error("xxh3_64", "expected 16 hex digits");
    digest.xxh3 = *h;
    st->files[k] = digest;
  }
  return Status::Ok();
}


}  // namespace

std::string StepDirName(int64_t step) { return fmt::format("step_{:08d}", step); }

std::optional<int64_t> StepOfDirName(std::string_view name) {
  if (!name.starts_with("step_") || name.size() < 13) return std::nullopt;
  const std::string_view digits = name.substr(5);
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  // Zero-padded to 8 digits: strip the padding, keep one digit for step 0.
  const size_t nz = digits.find_first_not_of('0');
  std::optional<int64_t> v = Decimal(nz == std::string_view::npos ? "0" : digits.substr(nz),
                                     kMaxStateCount);
  if (!v || StepDirName(*v) != name) return std::nullopt;
  return v;
}

std::string SerializeResumeState(const ResumeState& state) {
  // Without an identity the state can only be written in the first version's form (which
  // has no digests either); tandem's own writers always set one.
  json j;
  j["format"] = kFormat;
  j["version"] = state.identity ? kVersion : 1;
  j["step"] = state.step;
  j["tokens"] = state.tokens;
  j["positions"] = json::object();
  for (const auto& [r, p] : state.positions)
    j["positions"][std::to_string(r)] = {{"epoch", p.epoch}, {"next_batch", p.next_batch}};
  if (state.identity) {
    const RunIdentity& id = *state.identity;
    j["identity"] = {{"seed", id.seed},
                     {"target_model", id.target_model},
                     {"target_layer_ids", id.target_layer_ids},
                     {"target_replicas", id.target_replicas},
                     {"max_tokens", id.max_tokens},
                     {"data", id.data}};
  }
  if (state.identity) {
    j["files"] = json::object();
    for (const auto& [name, d] : state.files)
      j["files"][name] = {{"bytes", d.bytes}, {"xxh3_64", fmt::format("{:016x}", d.xxh3)}};
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<ResumeState> ParseResumeState(std::string_view text, const std::string& file) {
  Result<json> parsed = ParseJson(text, file + ": not valid JSON");
  if (!parsed.ok()) return DataLossError("{}", parsed.status().message());
  const json j = std::move(*parsed);
  if (!j.is_object()) return DataLossError("{}: expected a JSON object, got {}", file, j.type_name());
  Fields f(j, file, "");
  ASSIGN_OR_RETURN(std::string format, f.String("format"));
  if (format != kFormat) {
    return f.Error("format", fmt::format("\"{}\", expected \"{}\"",
                                         format.substr(0, 40), kFormat));
  }
  int64_t version = 1;
  if (f.Find("version") != nullptr) {
    ASSIGN_OR_RETURN(version, f.Int("version", 1, kVersion));
  }
  RETURN_IF_ERROR(f.OnlyKnown({"format", "version", "step", "tokens", "positions", "identity",
                               "files"}));
  ResumeState st;
  ASSIGN_OR_RETURN(st.step, f.Int("step", 0, kMaxStateCount));
  ASSIGN_OR_RETURN(st.tokens, f.Int("tokens", 0, kMaxStateCount));
  ASSIGN_OR_RETURN(const json* positions, f.Object("positions"));
  RETURN_IF_ERROR(ParsePositions(*positions, file, &st));
  if (version >= 2) {
    ASSIGN_OR_RETURN(const json* identity, f.Object("identity"));
    ASSIGN_OR_RETURN(st.identity, ParseIdentity(*identity, file));
    ASSIGN_OR_RETURN(const json* files, f.Object("files"));
    RETURN_IF_ERROR(ParseFiles(*files, file, &st));
  } else if (f.Find("identity") != nullptr || f.Find("files") != nullptr) {
    return f.Error("version", "version 1 files have no identity or files (missing version?)");
  }
  return st;
}

Result<std::string> CheckpointDir(const ConfigValue& s) {
  const ConfigValue* ck = s.Find("checkpoint");
  if (ck == nullptr) return std::string();
  if (!ck->is_table())
    return InvalidArgumentError("{}: `checkpoint` must be a table ({{ dir = ..., every_steps = "
                                "... }})", s.location());
  return ck->GetString("dir", "");
}

Result<ResumeMode> ParseResumeMode(const ConfigValue& s) {
  const ConfigValue* v = s.Find("resume");
  if (v == nullptr) return ResumeMode::kOff;
  if (Result<bool> b = v->AsBool(); b.ok()) return *b ? ResumeMode::kOn : ResumeMode::kOff;
  if (Result<std::string> str = v->AsString(); str.ok() && *str == "force") {
    return ResumeMode::kForce;
  }
  const std::string& loc = v->location().empty() ? s.location() : v->location();
  return InvalidArgumentError("{}{}key 'resume': expected true, false or \"force\"", loc,
                              loc.empty() ? "" : ": ");
}

Result<ResumeState> ReadStepState(const std::string& dir, const std::string& sub) {
  if (!StepOfDirName(sub)) {
    return DataLossError("{}: '{}' is not a step directory name (step_NNNNNNNN)", dir,
                         Printable(sub));
  }
  const std::string path = (std::filesystem::path(dir) / sub).string();
  const std::string file = path + "/" + kStateFile;
  Result<std::string> text = models::ReadTextFile(file);
  if (!text.ok()) {
    return DataLossError("{}: cannot read the step's state: {}", file, text.status().message());
  }
  ASSIGN_OR_RETURN(ResumeState st, ParseResumeState(*text, file));
  if (StepDirName(st.step) != sub) {
    return DataLossError("{}: field 'step': {} does not match its directory {}", file, st.step,
                         sub);
  }
  st.path = path;
  return st;
}

Result<std::optional<ResumeState>> ReadLatestState(const std::string& dir) {
  if (dir.empty()) return std::optional<ResumeState>();
  const std::string latest = dir + "/latest";
  std::error_code ec;
  if (!std::filesystem::exists(latest, ec)) return std::optional<ResumeState>();
  Result<std::string> text = models::ReadTextFile(latest);
  if (!text.ok()) return DataLossError("{}: cannot read: {}", latest, text.status().message());
  std::string sub = *text;
  if (!sub.empty() && sub.back() == '\n') sub.pop_back();
  Result<ResumeState> st = ReadStepState(dir, sub);
  if (!st.ok()) return st.status().WithContext(fmt::format("{} names '{}'", latest,
                                                           Printable(sub)));
  return std::optional<ResumeState>(std::move(st).value());
}

Status CommitState(const std::string& dir, const ResumeState& state,
                   const std::map<std::string, FileDigest>& written) {
  ResumeState st = state;
  st.files.clear();
  std::error_code ec, file_ec;
  for (const auto& e : std::filesystem::directory_iterator(state.path, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(file_ec)) continue;
    // Left out: the state file itself and temp files of interrupted atomic writes.
    if (name == kStateFile || name.find(".tmp.") != std::string::npos) {
      continue;
    }
    FileDigest d;
    if (auto w = written.find(name); w != written.end()) {
      d = w->second;
      const uint64_t on_disk = e.file_size(file_ec);
      if (file_ec || on_disk != d.bytes)
        return InternalError("{}: {} bytes on disk, the writer wrote {}", e.path().string(),
                             file_ec ? 0 : on_disk, d.bytes);
    } else {
      ASSIGN_OR_RETURN(d.xxh3, models::FileXxh3(e.path().string(), &d.bytes));
    }
    st.files[name] = d;
  }
  if (ec) return InternalError("cannot list {}: {}", state.path, ec.message());
  // Each file was fsynced before its rename; the directories make the names durable: the
  // step's files before its state file, the step before `latest`, and `latest` itself.
  RETURN_IF_ERROR(SyncDir(state.path));
  RETURN_IF_ERROR(models::WriteFileAtomically(state.path + "/" + kStateFile,
                                              SerializeResumeState(st)));
  RETURN_IF_ERROR(SyncDir(state.path));
  RETURN_IF_ERROR(SyncDir(dir));
  RETURN_IF_ERROR(models::WriteFileAtomically(
      dir + "/latest", std::filesystem::path(state.path).filename().string() + "\n"));
  return SyncDir(dir);
}

}  // namespace tandem::dflash
