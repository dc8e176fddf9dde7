#include "actors/dflash/checkpoint/checkpoint_retention.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/drafter_eval_best.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;

// The first line of DIR/<name>, or nullopt when the file does not exist.
Result<std::optional<std::string>> ReadPointer(const std::string& dir, const char* name) {
  const fs::path p = fs::path(dir) / name;
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::optional<std::string>();
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line))
    return DataLossError("{}: cannot read the step it names", p.string());
  return std::optional<std::string>(line);
}

}  // namespace

Result<std::vector<std::string>> ApplyRetention(const std::string& dir, int64_t keep_last) {
  std::vector<std::string> removed;
  if (keep_last <= 0 || dir.empty()) return removed;
  ASSIGN_OR_RETURN(std::optional<std::string> latest, ReadPointer(dir, "latest"));
  if (!latest) return removed;
  const std::optional<int64_t> latest_step = StepOfDirName(*latest);
  if (!latest_step) return removed;  // resume reports a garbled `latest` itself
  // DIR/best (drafter_eval_best.h); one that does not parse stops retention, naming it.
  Result<std::optional<BestCheckpoint>> best_or = ReadBestCheckpoint(dir);
  if (!best_or.ok())
    return DataLossError("{}; no checkpoint is removed until it is fixed",
                         best_or.status().message());
  std::optional<std::string> best;
  if (*best_or) best = StepDirName((*best_or)->step);
  std::vector<int64_t> complete;  // steps up to `latest`, newest first
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::optional<int64_t> step = StepOfDirName(e.path().filename().string());
    std::error_code type_ec;
    if (!step || *step > *latest_step || !e.is_directory(type_ec)) continue;
    if (fs::exists(e.path() / "tandem_state.json", type_ec)) complete.push_back(*step);
  }
  if (ec) return InternalError("cannot list {}: {}", dir, ec.message());
  std::sort(complete.rbegin(), complete.rend());
  const std::set<std::string> kept = {*latest, best.value_or("")};
  for (size_t i = static_cast<size_t>(keep_last); i < complete.size(); ++i) {
    const std::string name = StepDirName(complete[i]);
    if (kept.count(name) != 0) continue;
    const fs::path path = fs::path(dir) / name;
    std::error_code rm_ec;
    fs::remove(path / "tandem_state.json", rm_ec);  // first: the step is incomplete from now
    if (!rm_ec) fs::remove_all(path, rm_ec);
    if (rm_ec)
      return InternalError("cannot remove {} (checkpoint.keep_last = {}): {}", path.string(),
                           keep_last, rm_ec.message());
    removed.push_back(path.string());
  }
  return removed;
}

}  // namespace tandem::dflash
