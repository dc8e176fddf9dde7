#include "runtime/actor/plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

#include <fmt/ranges.h>

#include "runtime/core/logging.h"

namespace tandem {
namespace {

std::mutex& LoadMutex() {
  static std::mutex mu;
  return mu;
}

// Canonical path -> classes it registered; guarded by LoadMutex().
std::map<std::string, std::vector<std::string>>& Loaded() {
  static auto* loaded = new std::map<std::string, std::vector<std::string>>();
  return *loaded;
}

}  // namespace

Result<std::vector<std::string>> LoadPlugin(const std::string& path) {
  ActorRegistry& registry = ActorRegistry::Global();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFoundError("plugin '{}' not found{}; check the `plugins` entry of the job file",
                         path, ec ? fmt::format(" ({})", ec.message()) : std::string());
  }
  std::string canonical = std::filesystem::canonical(path, ec).string();
  if (ec) canonical = path;

  std::lock_guard<std::mutex> lock(LoadMutex());
  if (auto it = Loaded().find(canonical); it != Loaded().end()) return it->second;

  std::vector<std::string> before = registry.Names();
  size_t conflicts_before = registry.Conflicts().size();
  dlerror();
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return InvalidArgumentError(
        "cannot load plugin '{}': {}; build it against this tandem's headers and do not link "
        "the tandem libraries into it",
        path, err != nullptr ? err : "unknown dlopen error");
  }
  std::vector<std::string> conflicts = registry.Conflicts();
  if (conflicts.size() > conflicts_before) {
    conflicts.erase(conflicts.begin(), conflicts.begin() + conflicts_before);
    return InvalidArgumentError("plugin '{}' registers a taken class name: {}", path,
                                fmt::join(conflicts, "; "));
  }
  std::vector<std::string> after = registry.Names();
  std::vector<std::string> added;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  if (added.empty()) {
    return InvalidArgumentError(
        "plugin '{}' registered no actor classes; does it use TANDEM_REGISTER_ACTOR?", path);
  }
  TLOG_INFO("loaded plugin {}: {}", path, fmt::join(added, ", "));
  Loaded()[canonical] = added;
  return added;
}

}  // namespace tandem
