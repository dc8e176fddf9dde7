#include "actors/dflash/checkpoint/checkpoint_cleanup.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "runtime/core/logging.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

// A temp file that no live writer owns: "X.tmp" (checkpoint_state.cc writes them only
// while the single writer of DIR runs) or "X.tmp.PID" of a process that is gone.
bool IsStaleTemp(const std::string& name) {
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) return true;
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return false;
  const std::string pid = name.substr(at + 5);
  if (!AllDigits(pid)) return false;
  const int p = std::stoi(pid);
  return p > 0 && ::kill(p, 0) != 0 && errno == ESRCH;
}

bool IsStepDir(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  std::error_code ec;
  return name.rfind("step_", 0) == 0 && name.size() > 5 &&
         name.find_first_not_of("0123456789", 5) == std::string::npos && e.is_directory(ec);
}

Status Remove(const fs::path& p, const std::string& why, std::vector<std::string>* removed) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) return InternalError("cannot remove {} ({}): {}", p.string(), why, ec.message());
  TLOG_INFO("checkpoint cleanup: removed {} ({})", p.string(), why);
  removed->push_back(p.string());
  return Status::Ok();
}

Status CleanTemps(const fs::path& dir, std::vector<std::string>* removed) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (e.is_regular_file(type_ec) && IsStaleTemp(e.path().filename().string()))
      stale.push_back(e.path());
  }
  for (const fs::path& p : stale)
    RETURN_IF_ERROR(Remove(p, "temp file of an interrupted write", removed));
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> CleanCheckpointDir(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return removed;
  std::string latest;
  if (std::ifstream in(dir + "/latest"); in) std::getline(in, latest);
  RETURN_IF_ERROR(CleanTemps(dir, &removed));
  std::vector<fs::directory_entry> steps;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (IsStepDir(e)) steps.push_back(e);
  for (const auto& e : steps) {
    const std::string name = e.path().filename().string();
    if (name == latest) {
      RETURN_IF_ERROR(CleanTemps(e.path(), &removed));
      continue;
    }
    std::error_code exists_ec;
    if (!fs::exists(e.path() / "tandem_state.json", exists_ec)) {
      RETURN_IF_ERROR(Remove(e.path(), "incomplete step: no tandem_state.json", &removed));
    } else {
      RETURN_IF_ERROR(CleanTemps(e.path(), &removed));
    }
  }
  return removed;
}

}  // namespace tandem::dflash
