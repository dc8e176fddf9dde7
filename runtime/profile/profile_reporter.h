// ProfileReporter: a background thread that closes a ProfileStats window every interval,
// logs its table and leaves the snapshot in ProfileStats::LatestSnapshot() for `tandem status`.
//
// Why a thread and not a MaybeReport() called from loops: the loops worth reporting on are
// often the ones that are stuck (a drafter blocked in a channel pop for minutes), and a
// report that depends on them running would go quiet exactly then.
//
// The interval comes from ResolveProfileInterval: TANDEM_PROFILE_INTERVAL (seconds) if set,
// else the job's `[profile] interval_s`, else 60 s. An interval of 0 turns periodic reports
// off (stages still record; RollWindow can be called by hand).
//
// Thread-safety: Stop() and the destructor may be called from any thread except the
// reporter's own (i.e. not from a pre-roll hook).
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/profile/profile_stats.h"

namespace tandem {

inline constexpr const char* kProfileIntervalEnv = "TANDEM_PROFILE_INTERVAL";
inline constexpr Duration kDefaultProfileInterval = std::chrono::seconds(60);

// The report interval: the environment variable wins over the job file, which wins over
// the default. InvalidArgument (naming the source) for a negative or non-numeric value.
Result<Duration> ResolveProfileInterval(std::optional<double> job_interval_s);

class ProfileReporter {
 public:
  // Starts the thread unless interval is 0. `stats` must outlive the reporter.
  ProfileReporter(ProfileStats* stats, Duration interval);
  // Stop().
  ~ProfileReporter();
  ProfileReporter(const ProfileReporter&) = delete;
  ProfileReporter& operator=(const ProfileReporter&) = delete;

  // Ends the thread after a final report of the partial window (if any stage recorded in
  // it). Idempotent.
  void Stop() EXCLUDES(mu_);

  Duration interval() const { return interval_; }

 private:
  void Run();
  void Report();

  ProfileStats* const stats_;
  const Duration interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tandem
