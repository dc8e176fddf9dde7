#include "data/corpus/sharded_set.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/core/json_parse.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr const char* kManifest = "shards.json";
constexpr const char* kManifestKind = "tandem sharded set";
constexpr int kManifestVersion = 1;
constexpr const char* kTmpSuffix = ".tmp";

std::string Join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

std::string ShardName(size_t index) { return fmt::format("shard-{:05d}", index); }

// Names a writer may leave in its directory (and so may remove).
bool IsOwnName(const std::string& name) {
  static const std::regex own(
      R"((shards\.json|shard-[0-9]{5,})(\.tmp)?|header|tokens\.u32|offsets\.u64|loss_mask\.u8)");
  return std::regex_match(name, own);
}

// Flushes a file (or directory) to disk: the rename that follows must not be seen before
// the data it names.
Status SyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return InvalidArgumentError("{}: cannot open to sync: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return InvalidArgumentError("{}: fsync failed: {}", path, std::strerror(err));
  return Status::Ok();
}

Status RenameOver(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) return InvalidArgumentError("cannot rename {} to {}: {}", from, to, ec.message());
  return Status::Ok();
}

Status RemoveAll(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return InvalidArgumentError("{}: cannot remove: {}", path, ec.message());
  return Status::Ok();
}

Result<ShardManifest> ParseManifest(const std::string& path, const std::string& text) {
  auto bad = [&](const std::string& what) { return DataLossError("{}: {}", path, what); };
  Result<ordered_json> parsed = ParseOrderedJson(text, path);
  if (!parsed.ok()) return DataLossError("{}", parsed.status().message());
  const ordered_json j = std::move(*parsed);
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("kind") || !j["kind"].is_string() || j["kind"].get<std::string>() != kManifestKind) {
    return bad(fmt::format("\"kind\" is not \"{}\"", kManifestKind));
  }
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int>() != kManifestVersion) {
    return bad(fmt::format("\"version\" is not {}", kManifestVersion));
  }
  if (!j.contains("complete") || !j["complete"].is_boolean()) return bad("no boolean \"complete\"");
  if (!j.contains("shards") || !j["shards"].is_array()) return bad("no \"shards\" array");
  ShardManifest m;
  m.complete = j["complete"].get<bool>();
  for (size_t k = 0; k < j["shards"].size(); ++k) {
    const ordered_json& s = j["shards"][k];
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string() ||
        !s.contains("documents") || !s["documents"].is_number_integer() ||
        !s.contains("tokens") || !s["tokens"].is_number_integer()) {
      return bad(fmt::format("shards[{}] needs \"name\", \"documents\" and \"tokens\"", k));
    }
    ShardEntry e{s["name"].get<std::string>(), s["documents"].get<int64_t>(),
                 s["tokens"].get<int64_t>()};
    if (e.name != ShardName(k)) {
      return bad(fmt::format("shards[{}] is named '{}', expected '{}'", k, e.name, ShardName(k)));
    }
    if (e.documents <= 0 || e.tokens < 0) {
      return bad(fmt::format("shards[{}] has {} documents and {} tokens (a shard holds at least "
                             "one document)",
                             k, s["documents"].dump(), s["tokens"].dump()));
    }
    m.shards.push_back(std::move(e));
  }
  m.producer_state = j.contains("producer") ? j["producer"].dump() : "{}";
  return m;
}

}  // namespace

bool IsShardedSet(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(Join(path, kManifest), ec);
}

Status CheckDataSetOutput(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  if (!fs::is_directory(dir, ec)) return InvalidArgumentError("{}: exists and is not a directory", dir);
  auto it = fs::directory_iterator(dir, ec);
  if (ec) return InvalidArgumentError("{}: cannot list: {}", dir, ec.message());
  if (it == fs::directory_iterator()) return Status::Ok();
  if (HasBinarySetMagic(dir) || (IsShardedSet(dir) && ReadShardManifest(dir).ok())) {
    return Status::Ok();
  }
  return InvalidArgumentError(
      "{}: is not empty and holds no tandem data set (it has '{}'); give an empty or new "
      "directory",
      dir, it->path().filename().string());
}

Result<ShardManifest> ReadShardManifest(const std::string& dir) {
  const std::string path = Join(dir, kManifest);
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("{}: no such file (not a sharded set)", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseManifest(path, text);
}

namespace {

// Shard `e` of the set in `dir`, opened with `check`, its counts matching the manifest's
// entry; DataLoss naming the shard when it is missing or they differ.
Result<Corpus> OpenListedShard(const std::string& dir, const ShardEntry& e, BinaryCheck check) {
  const std::string path = Join(dir, e.name);
  auto part = OpenBinary(path, check);
  if (!part.ok()) {
    if (part.status().code() == StatusCode::kNotFound) {
      return DataLossError("{}: missing, but {} lists it", path, Join(dir, kManifest));
    }
    return part.status();
  }
  if (part->documents() != e.documents || part->tokens() != e.tokens) {
    return DataLossError("{}: {} documents and {} tokens, but {} says {} and {}", path,
                         part->documents(), part->tokens(), Join(dir, kManifest), e.documents,
                         e.tokens);
  }
  return part;
}

}  // namespace

Result<Corpus> OpenShardedSet(const std::string& dir, BinaryCheck check) {
  ASSIGN_OR_RETURN(ShardManifest m, ReadShardManifest(dir));
  if (!m.complete) {
    return InvalidArgumentError(
        "{}: the conversion that writes this set has not finished ({} shards so far); run it "
        "again with --resume",
        dir, m.shards.size());
  }
  std::vector<Corpus> parts;
  for (const ShardEntry& e : m.shards) {
    ASSIGN_OR_RETURN(Corpus part, OpenListedShard(dir, e, check));
    parts.push_back(std::move(part));
  }
  return Corpus::Concat(parts, dir);
}

Result<ShardedSetWriter> ShardedSetWriter::Create(const std::string& dir,
                                                  std::string producer_state) {
  std::error_code ec;
  RETURN_IF_ERROR(CheckDataSetOutput(dir));
  if (fs::exists(dir, ec)) {
    if (IsShardedSet(dir)) {
      ASSIGN_OR_RETURN(ShardManifest old, ReadShardManifest(dir));
      if (!old.complete) {
        return InvalidArgumentError(
            "{}: holds an unfinished conversion ({} shards); pass --resume to continue it, or "
            "remove the directory to start again",
            dir, old.shards.size());
      }
    }
    std::vector<std::string> own;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!IsOwnName(name)) {
        return InvalidArgumentError(
            "{}: holds '{}', which is not part of a data set; give an empty or new directory",
            dir, name);
      }
      own.push_back(entry.path().string());
    }
    // The manifest goes first, so a kill halfway leaves no set that looks complete.
    RETURN_IF_ERROR(RemoveAll(Join(dir, kManifest)));
    for (const std::string& p : own) RETURN_IF_ERROR(RemoveAll(p));
  }
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("{}: cannot create directory: {}", dir, ec.message());
  ShardedSetWriter w(dir);
  w.manifest_.producer_state = std::move(producer_state);
  RETURN_IF_ERROR(w.WriteManifest());
  return w;
}

Result<ShardedSetWriter> ShardedSetWriter::Resume(const std::string& dir) {
  ShardedSetWriter w(dir);
  ASSIGN_OR_RETURN(w.manifest_, ReadShardManifest(dir));
  if (w.manifest_.complete) {
    return InvalidArgumentError("{}: the conversion is already complete; nothing to resume", dir);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kManifest) continue;
    bool listed = false;
    for (const ShardEntry& e : w.manifest_.shards) listed = listed || e.name == name;
    if (!listed && IsOwnName(name)) RETURN_IF_ERROR(RemoveAll(entry.path().string()));
  }
  // The shards already written must be what the manifest says, or the finished set would
  // not open: checked now (structure only, O(documents)), before anything is appended.
  for (const ShardEntry& e : w.manifest_.shards) {
    RETURN_IF_ERROR(OpenListedShard(dir, e, BinaryCheck::kStructure).status());
  }
  return w;
}

Status ShardedSetWriter::AddShard(const Corpus& shard, std::string producer_state) {
  TANDEM_CHECK(!shard.is_concat() && shard.documents() > 0);
  const std::string name = ShardName(manifest_.shards.size());
  const std::string tmp = Join(dir_, name + kTmpSuffix);
  RETURN_IF_ERROR(RemoveAll(tmp));
  RETURN_IF_ERROR(WriteBinary(shard, tmp));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    RETURN_IF_ERROR(SyncPath(entry.path().string(), /*directory=*/false));
  }
  RETURN_IF_ERROR(SyncPath(tmp, /*directory=*/true));
  RETURN_IF_ERROR(RemoveAll(Join(dir_, name)));
  RETURN_IF_ERROR(RenameOver(tmp, Join(dir_, name)));
  if (fault_) fault_("shard_renamed");
  manifest_.shards.push_back({name, shard.documents(), shard.tokens()});
  manifest_.producer_state = std::move(producer_state);
  return WriteManifest();
}

Status ShardedSetWriter::Finish(std::string producer_state) {
  manifest_.complete = true;
  manifest_.producer_state = std::move(producer_state);
  return WriteManifest();
}

Status ShardedSetWriter::Discard() {
  RETURN_IF_ERROR(RemoveAll(Join(dir_, kManifest)));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (IsOwnName(name)) RETURN_IF_ERROR(RemoveAll(entry.path().string()));
  }
  if (fs::is_empty(dir_, ec) && !ec) fs::remove(dir_, ec);
  manifest_ = ShardManifest();
  return Status::Ok();
}

Status ShardedSetWriter::WriteManifest() {
  ordered_json j;
  j["kind"] = kManifestKind;
  j["version"] = kManifestVersion;
  j["complete"] = manifest_.complete;
  j["shards"] = ordered_json::array();
  for (const ShardEntry& e : manifest_.shards) {
    j["shards"].push_back({{"name", e.name}, {"documents", e.documents}, {"tokens", e.tokens}});
  }
  Result<ordered_json> producer = ParseOrderedJson(manifest_.producer_state, "producer state");
  TANDEM_CHECK_MSG(producer.ok(), "{}", producer.status().message());
  j["producer"] = std::move(*producer);
  const std::string path = Join(dir_, kManifest);
  const std::string tmp = path + kTmpSuffix;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return InvalidArgumentError("{}: cannot create file", tmp);
    out << j.dump(1) << "\n";
    out.close();
    if (!out) return InvalidArgumentError("{}: write failed (disk full?)", tmp);
  }
  RETURN_IF_ERROR(SyncPath(tmp, /*directory=*/false));
  RETURN_IF_ERROR(RenameOver(tmp, path));
  return SyncPath(dir_, /*directory=*/true);
}

}  // namespace tandem::data
