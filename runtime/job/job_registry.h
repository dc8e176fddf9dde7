// JobRegistry: what the actors of one job share, by type: a table of loaded target models,
// the rendezvous of a data-parallel group. Each entry is made on first use and destroyed
// with the registry, after the job's actors have stopped, so nothing links the actors of
// one job to those of the next and no process-global table carries state between them.
//
//   struct TargetTable { std::mutex mu; std::map<std::string, ...> by_key; };
//   TargetTable& t = env->registry->Get<TargetTable>();
//
// Thread-safety: Get() is safe from any thread; T itself must be thread-safe (it is shared
// by every actor of the job).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <typeindex>

#include "runtime/core/thread_annotations.h"

namespace tandem {

class JobRegistry {
 public:
  JobRegistry() = default;
  JobRegistry(const JobRegistry&) = delete;
  JobRegistry& operator=(const JobRegistry&) = delete;

  // The job's one T, default-constructed on first use; valid while the registry lives.
  template <class T>
  T& Get() EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<void>& slot = objects_[std::type_index(typeid(T))];
    if (slot == nullptr) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

 private:
  std::mutex mu_;
  std::map<std::type_index, std::shared_ptr<void>> objects_ GUARDED_BY(mu_);
};

}  // namespace tandem
