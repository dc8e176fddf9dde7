#include "runtime/control/home.h"

#include <sys/stat.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "runtime/core/logging.h"

namespace tandem {

namespace fs = std::filesystem;

Result<std::string> TandemHome() {
  std::string home;
  if (const char* h = std::getenv("TANDEM_HOME"); h != nullptr && *h != '\0') {
    home = h;
  } else if (const char* u = std::getenv("HOME"); u != nullptr && *u != '\0') {
    home = std::string(u) + "/.tandem";
  } else {
    return InvalidArgumentError("neither TANDEM_HOME nor HOME is set");
  }
  std::error_code ec;
  if (!fs::exists(home, ec)) {
    fs::create_directories(home, ec);
    if (ec) return InvalidArgumentError("cannot create TANDEM_HOME '{}': {}", home, ec.message());
    ::chmod(home.c_str(), 0700);
  }
  struct stat st {};
  if (::stat(home.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return InvalidArgumentError("TANDEM_HOME '{}' is not a directory", home);
  if ((st.st_mode & 077) != 0)
    return InvalidArgumentError("TANDEM_HOME '{}' is open to other users (mode {:o}); run "
                                "`chmod 700 {}`", home, st.st_mode & 0777, home);
  // Another user's directory, even mode 700, is theirs: its token and socket are not ours.
  if (st.st_uid != ::geteuid())
    return InvalidArgumentError("TANDEM_HOME '{}' belongs to uid {}, not to this user (uid {}); "
                                "use a directory of your own", home, st.st_uid, ::geteuid());
  return home;
}

std::string DaemonSocketPath(const std::string& home) { return home + "/tandem.sock"; }

std::string RunSocketPath(const std::string& home, int pid) {
  return fmt::format("{}/run-{}.sock", home, pid);
}

std::vector<std::string> RunSocketPaths(const std::string& home) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(home, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("run-", 0) == 0 && e.path().extension() == ".sock")
      found.emplace_back(e.last_write_time(ec), e.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

namespace {

// The pid in "run-PID.sock", or -1.
int RunSocketPid(const std::string& name) {
  if (name.size() <= 9 || name.rfind("run-", 0) != 0 || name.substr(name.size() - 5) != ".sock")
    return -1;
  const std::string digits = name.substr(4, name.size() - 9);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(digits);
}

bool ProcessExists(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }

}  // namespace

std::vector<std::string> CleanStaleFiles(const std::string& home) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(home, ec)) {
    const std::string name = e.path().filename().string();
    const int pid = RunSocketPid(name);
    if (pid < 0 || ProcessExists(pid)) continue;
    std::error_code rm_ec;
    if (fs::remove(e.path(), rm_ec)) {
      TLOG_INFO("removed {}: left by `tandem run` process {}, which no longer exists",
                e.path().string(), pid);
      removed.push_back(e.path().string());
    }
  }
  return removed;
}

Result<std::string> LoadToken(const std::string& home, const std::string& token_file) {
  if (const char* t = std::getenv("TANDEM_TOKEN"); t != nullptr && *t != '\0') return std::string(t);
  std::string path = token_file.empty() ? home + "/token" : token_file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (token_file.empty()) return std::string();
    return NotFoundError("token file '{}' does not exist", path);
  }
  if ((st.st_mode & 077) != 0)
    return InvalidArgumentError("token file '{}' must be readable by its owner only (mode {:o}); "
                                "run `chmod 600 {}`", path, st.st_mode & 0777, path);
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  if (token.empty()) return InvalidArgumentError("token file '{}' is empty", path);
  return token;
}

}  // namespace tandem
