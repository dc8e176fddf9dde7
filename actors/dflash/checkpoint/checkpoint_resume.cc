#include "actors/dflash/checkpoint/checkpoint_resume.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "models/io/file_digest.h"
#include "runtime/core/json_parse.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStateFile = "tandem_state.json";
// Files every step directory holds (dflash_checkpoint.h); their digests must be recorded.
constexpr const char* kStepFiles[] = {"config.json", "model.safetensors",
                                      "optimizer.safetensors", "trainer_state.json"};

// Step directories of DIR, newest first.
std::vector<std::pair<int64_t, std::string>> StepDirs(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::optional<int64_t> step = StepOfDirName(name);
    if (step && e.is_directory(ec)) out.emplace_back(*step, name);
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

bool HasStateFile(const std::string& dir, const std::string& sub) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / sub / kStateFile, ec);
}

template <typename T>
void Differ(std::vector<std::string>* out, const char* what, const T& saved, const T& now) {
  if (saved != now) out->push_back(fmt::format("{} {} (checkpoint) vs {} (this job)", what,
                                               saved, now));
}

// Where the identity of the two runs differs, one entry per field.
std::vector<std::string> IdentityDifferences(const RunIdentity& a, const RunIdentity& b) {
  std::vector<std::string> d;
  Differ(&d, "seed", a.seed, b.seed);
  Differ(&d, "target model", fmt::format("'{}'", a.target_model),
         fmt::format("'{}'", b.target_model));
  Differ(&d, "target layers", fmt::format("[{}]", fmt::join(a.target_layer_ids, ", ")),
         fmt::format("[{}]", fmt::join(b.target_layer_ids, ", ")));
  Differ(&d, "target replicas", a.target_replicas, b.target_replicas);
  Differ(&d, "max_tokens", a.max_tokens, b.max_tokens);
  Differ(&d, "data", fmt::format("'{}'", a.data), fmt::format("'{}'", b.data));
  return d;
}

// Where the saved drafter config.json differs from `config`, one entry per top-level key.
Result<std::vector<std::string>> ConfigDifferences(const std::string& step_dir,
                                                   const models::DFlashConfig& config) {
  const std::string path = step_dir + "/config.json";
  Result<models::DFlashConfig> saved = models::LoadDFlashConfig(path);
  if (!saved.ok()) return DataLossError("{}: {}", path, saved.status().message());
  const nlohmann::json a = models::DFlashConfigToJson(*saved);
  const nlohmann::json b = models::DFlashConfigToJson(config);
  std::vector<std::string> d;
  for (const auto& [k, v] : a.items()) {
    auto it = b.find(k);
    if (it == b.end() || *it != v) {
      d.push_back(fmt::format("config.json {}: {} (checkpoint) vs {} (this job)", k, DescribeJson(v),
                              it == b.end() ? "absent" : DescribeJson(*it)));
    }
  }
  for (const auto& [k, v] : b.items()) {
    if (!a.contains(k)) d.push_back(fmt::format("config.json {}: absent (checkpoint) vs {}", k,
                                                DescribeJson(v)));
  }
  return d;
}

std::string UtcStamp() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

Result<std::optional<ResumePoint>> FindResumePoint(const std::string& dir) {
  if (dir.empty()) return std::optional<ResumePoint>();
  ASSIGN_OR_RETURN(std::optional<ResumeState> latest, ReadLatestState(dir));
  if (latest) return std::optional<ResumePoint>(ResumePoint{*latest, dir + "/latest"});
  int incomplete = 0;
  for (const auto& [step, sub] : StepDirs(dir)) {
    if (!HasStateFile(dir, sub)) {
      ++incomplete;  // never committed: a write that was interrupted
      continue;
    }
    ASSIGN_OR_RETURN(ResumeState st, ReadStepState(dir, sub));
    return std::optional<ResumePoint>(ResumePoint{
        st, fmt::format("{}/latest is missing: the newest complete step directory{}", dir,
                        incomplete > 0 ? fmt::format(" ({} newer incomplete)", incomplete)
                                       : std::string())});
  }
  return std::optional<ResumePoint>();
}

Status VerifyStepFiles(const ResumeState& state, ResumeMode mode) {
  const std::string state_file = state.path + "/" + kStateFile;
  if (state.files.empty()) {
    if (mode == ResumeMode::kForce) return Status::Ok();
    return InvalidArgumentError("{}: records no file digests (written by an older tandem); set "
                                "resume = \"force\" to resume from it unchecked",
                                state_file);
  }
  for (const char* name : kStepFiles) {
    if (!state.files.contains(name)) {
      return DataLossError("{}: field 'files.{}': missing", state_file, name);
    }
  }
  for (const auto& [name, want] : state.files) {
    const std::string path = state.path + "/" + name;
    uint64_t bytes = 0;
    Result<uint64_t> digest = models::FileXxh3(path, &bytes);
    if (!digest.ok()) {
      return DataLossError("{}: listed in {} but cannot be read: {}", path, state_file,
                           digest.status().message());
    }
    if (bytes != want.bytes) {
      return DataLossError("{}: {} bytes, but {} records {} (truncated or replaced?)", path, bytes,
                           state_file, want.bytes);
    }
    if (*digest != want.xxh3) {
      return DataLossError("{}: XXH3-64 digest {:016x} does not match {:016x} recorded in {} "
                           "(the file is corrupt)", path, *digest, want.xxh3, state_file);
    }
  }
  return Status::Ok();
}

Result<std::string> CheckSameJob(const ResumeState& state, const RunIdentity& now,
                                 const models::DFlashConfig& config, ResumeMode mode) {
  std::vector<std::string> diffs;
  if (!state.identity) {
    diffs.push_back("no job identity recorded (written by an older tandem)");
  } else {
    diffs = IdentityDifferences(*state.identity, now);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> config_diffs, ConfigDifferences(state.path, config));
  diffs.insert(diffs.end(), config_diffs.begin(), config_diffs.end());
  if (diffs.empty()) return std::string();
  const std::string list = fmt::format("{}", fmt::join(diffs, "; "));
  if (mode == ResumeMode::kForce) {
    return fmt::format("resuming from {} made by a different job: {}", state.path, list);
  }
  return InvalidArgumentError("{} was made by a different job: {}; set resume = \"force\" to "
                              "resume from it anyway, or use another checkpoint.dir",
                              state.path, list);
}

Status PrepareToContinue(const std::string& dir, const ResumeState& state,
                         const std::string& who) {
  for (const auto& [step, sub] : StepDirs(dir)) {
    if (step <= state.step) break;
    const std::string path = dir + "/" + sub;
    if (HasStateFile(dir, sub)) {
      return InvalidArgumentError("{}: a checkpoint newer than the resume point {} (step {}); "
                                  "continuing would overwrite it. Point {}/latest at it to "
                                  "resume from there, or move it away",
                                  path, state.path, state.step, dir);
    }
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) return InternalError("cannot remove incomplete step directory {}: {}", path, ec.message());
    TLOG_WARN("{}: removed {}, an incomplete step directory (its write was interrupted; "
              "no tandem_state.json)", who, path);
  }
  return Status::Ok();
}

Status PrepareFreshDir(const std::string& dir, const std::string& who) {
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return InvalidArgumentError("checkpoint.dir '{}' exists and is not a directory", dir);
  }
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("checkpoint.dir '{}': cannot create: {}", dir, ec.message());
  std::vector<std::string> old;
  for (const auto& [step, sub] : StepDirs(dir)) old.push_back(sub);
  const bool has_latest = fs::exists(dir + "/latest", ec);
  if (fs::exists(dir + "/best", ec)) old.push_back("best");  // eval's keep_best pointer
  if (old.empty() && !has_latest) return Status::Ok();
  std::string aside = dir + "/previous-" + UtcStamp();
  for (int i = 2; fs::exists(aside, ec); ++i) aside = dir + "/previous-" + UtcStamp() + "-" + std::to_string(i);
  fs::create_directory(aside, ec);
  if (ec) return InternalError("cannot create {}: {}", aside, ec.message());
  if (has_latest) old.push_back("latest");
  for (const std::string& name : old) {
    fs::rename(dir + "/" + name, aside + "/" + name, ec);
    if (ec) return InternalError("cannot move {}/{} to {}: {}", dir, name, aside, ec.message());
  }
  TLOG_WARN("{}: resume = false, so the checkpoints of an earlier run in {} ({} entries) were "
            "moved to {} rather than overwritten; set resume = true to continue a run instead",
            who, dir, old.size(), aside);
  return Status::Ok();
}

Status CheckStepDirIsNew(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    return InvalidArgumentError("{} already exists: tandem never overwrites a step directory",
                                path);
  }
  return Status::Ok();
}

Result<std::optional<ResumePoint>> OpenCheckpointDir(const std::string& dir, ResumeMode mode,
                                                     bool restarted, bool writes,
                                                     const RunIdentity& now,
                                                     const models::DFlashConfig& config,
                                                     const std::string& who) {
  if (dir.empty()) return std::optional<ResumePoint>();
  if (mode == ResumeMode::kOff && !restarted) {
    if (writes) RETURN_IF_ERROR(PrepareFreshDir(dir, who));
    return std::optional<ResumePoint>();
  }
  ASSIGN_OR_RETURN(std::optional<ResumePoint> point, FindResumePoint(dir));
  if (!point) {
    if (writes) {
      ResumeState none;  // no step yet
      none.step = -1;
      RETURN_IF_ERROR(PrepareToContinue(dir, none, who));
      TLOG_INFO("{}: resume: no checkpoint in {} yet; starting at step 0", who, dir);
    }
    return point;
  }
  RETURN_IF_ERROR(VerifyStepFiles(point->state, mode));
  if (point->state.files.empty()) {
    TLOG_WARN("{}: resume = \"force\": {} has no file digests; loading it unchecked", who,
              point->state.path);
  }
  ASSIGN_OR_RETURN(std::string forced, CheckSameJob(point->state, now, config, mode));
  if (!forced.empty()) TLOG_WARN("{}: resume = \"force\": {}", who, forced);
  if (writes) RETURN_IF_ERROR(PrepareToContinue(dir, point->state, who));
  TLOG_INFO("{}: resuming from {} at step {} (chosen as {}; file digests {})", who,
            point->state.path, point->state.step, point->how,
            point->state.files.empty() ? "absent" : "verified");
  return point;
}

}  // namespace tandem::dflash
