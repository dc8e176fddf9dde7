// ConsumerFaults: a deliberate fault a test injects into a job's demo.consumer replicas, to
// show supervision (a consumer that throws is restarted, or fails the job with its cause).
// Like a fault-injection environment it is not part of the job file: a job reaches it through
// its registry (JobRegistry::Get<ConsumerFaults>()), a job run from a file has a default one
// (no faults), and a test installs its own by passing a registry to the runner:
//
//   auto registry = std::make_shared<JobRegistry>();
//   registry->Get<demo::ConsumerFaults>().Set({.fail_at = 50});
//   JobRunner runner({.registry = registry});
//
// Each consumer replica throws once, when it has consumed `fail_at` objects; a restarted
// instance of that replica does not throw again (the registry lives as long as the job).
// Thread-safety: every member is safe from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "runtime/core/thread_annotations.h"

namespace tandem::demo {

class ConsumerFaults {
 public:
  struct Plan {
    int64_t fail_at = -1;  // objects consumed before the one throw (-1: never)
  };

  void Set(const Plan& plan) EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = plan;
  }
  Plan Get() const EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return plan_;
  }
  // True once per `replica` name: the first call for it claims the throw.
  bool ClaimThrow(const std::string& replica) EXCLUDES(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return thrown_.insert(replica).second;
  }

 private:
  mutable std::mutex mu_;
  Plan plan_ GUARDED_BY(mu_);
  std::set<std::string> thrown_ GUARDED_BY(mu_);
};

}  // namespace tandem::demo
