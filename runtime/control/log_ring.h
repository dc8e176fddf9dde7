// LogRing: the last lines logged by one job (its runner and its actors), numbered so a
// follower can ask for "lines after N" (`tandem logs JOB --follow`). Oldest lines are
// dropped past the capacity.
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/control/messages.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

// Whether a line of `actor` is wanted by a logs request for `want`: "" wants every line, a
// name its own, a group name such as "consumer" its replicas "consumer/0", ...
bool LogActorMatches(const std::string& want, const std::string& actor);

class LogRing {
 public:
  explicit LogRing(size_t capacity = 20000) : capacity_(capacity) {}

  void Append(std::string actor, std::string text) EXCLUDES(mu_);
  // Up to `max_lines` lines with seq > after, from `actor` only unless it is "" (a group name
  // such as "consumer" matches its replicas "consumer/0", ...). *last is the seq of the last
  // line returned, or `after` when none.
  std::vector<LogLine> Query(const std::string& actor, uint64_t after, size_t max_lines,
                             uint64_t* last) const EXCLUDES(mu_);

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<LogLine> lines_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
};

}  // namespace tandem
