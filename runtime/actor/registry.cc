#include "runtime/actor/registry.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "runtime/core/logging.h"

namespace tandem {

ActorRegistry& ActorRegistry::Global() {
  static ActorRegistry* registry = new ActorRegistry();  // never destroyed: plugins may outlive
  return *registry;
}

Status ActorRegistry::Register(ActorClass cls) {
  if (cls.name.empty() || !cls.factory) {
    return InvalidArgumentError("actor class registration needs a name and a factory (got '{}')",
                                cls.name);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const ActorClass& c : classes_) {
    if (c.name == cls.name) {
      std::string msg = fmt::format(
          "actor class '{}' is already registered (C++ type {}); refusing C++ type {}",
          cls.name, c.type.name(), cls.type.name());
      conflicts_.push_back(msg);
      return InvalidArgumentError("{}", msg);
    }
  }
  classes_.push_back(std::move(cls));
  return Status::Ok();
}

Result<ActorClass> ActorRegistry::Find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> known;
  for (const ActorClass& c : classes_) {
    if (c.name == name) return c;
    known.push_back(c.name);
  }
  std::sort(known.begin(), known.end());
  return NotFoundError(
      "no actor class '{}' is registered (known: {}); check the class name, or list the "
      "plugin that defines it in `plugins`",
      name, known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
}

std::vector<std::string> ActorRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const ActorClass& c : classes_) out.push_back(c.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ActorRegistry::Conflicts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return conflicts_;
}

namespace internal {

bool RegisterActorAtStartup(ActorClass cls) {
  Status st = ActorRegistry::Global().Register(std::move(cls));
  if (!st.ok()) TLOG_ERROR("{}", st.ToString());
  return st.ok();
}

}  // namespace internal
}  // namespace tandem
