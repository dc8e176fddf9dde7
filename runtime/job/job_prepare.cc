#include "runtime/job/job_prepare.h"

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "runtime/core/logging.h"

namespace tandem {
namespace {

struct Hooks {
  std::mutex mu;
  std::map<std::string, JobPrepareHook> by_class;
};

Hooks& AllHooks() {
  static Hooks* hooks = new Hooks;
  return *hooks;
}

}  // namespace

bool RegisterJobPrepare(const std::string& class_name, JobPrepareHook hook) {
  Hooks& h = AllHooks();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.by_class.emplace(class_name, std::move(hook)).second) {
    TLOG_ERROR("a job-prepare hook for class '{}' is already registered", class_name);
    return false;
  }
  return true;
}

Status PrepareJob(const JobSpec& job, JobRegistry& registry) {
  for (const ActorGroupSpec& g : job.actors) {
    JobPrepareHook hook;
    {
      Hooks& h = AllHooks();
      std::lock_guard<std::mutex> lock(h.mu);
      auto it = h.by_class.find(g.class_name);
      if (it == h.by_class.end()) continue;
      hook = it->second;
    }
    RETURN_IF_ERROR(hook(job, g, registry).WithContext(
        fmt::format("{}: preparing actors.{} ({})", job.path, g.name, g.class_name)));
  }
  return Status::Ok();
}

}  // namespace tandem
