// ProfileStats: per-stage timing of a process's hot loops, over interval windows.
//
// Every named stage ("target.model_forward", "drafter.queue_get") keeps a histogram of its
// durations for the current window; RollWindow() closes the window, folds it into the
// stage's cumulative totals and returns (and keeps) a ProfileSnapshot with count, mean,
// p50, p99, max, total and % of wall time per stage. A ProfileReporter (profile_reporter.h)
// rolls and logs the window periodically; GPU stages come through GpuStageTimers.
//
//   ProfileStats prof("drafter");
//   StageHandle fwd = prof.Stage("drafter.forward");     // once, outside the loop
//   for (...) { auto t = prof.Scope(fwd); ... }           // or prof.Scope("name")
//
// Cost: a record takes the stage's own mutex for a histogram increment (tens of ns; only
// threads recording the same stage contend, and RollWindow holds it just to flip the
// window). It never allocates once the stage exists. Scope(name) adds a shared-lock hash
// lookup; hot loops should keep a StageHandle. Scopes and windows are timed on the
// ProfileStats' Clock (runtime/core/clock.h; tests pass a ManualClock). With CUDA, a ScopedTimer is also an NVTX
// range named after the stage, so Nsight timelines show the same stages.
//
// Thread-safety: all methods are safe from any thread. StageHandles stay valid for the
// life of the ProfileStats. A ScopedTimer must end on the thread that started it (NVTX
// ranges are per-thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

class ProfileStage;  // one stage's state; defined in profile_stats.cc

// A cheap, copyable reference to a stage of a ProfileStats.
class StageHandle {
 public:
  StageHandle() = default;
  bool valid() const { return stage_ != nullptr; }
  const std::string& name() const;
  // Adds one duration to the stage's current window. REQUIRES: valid().
  void Record(int64_t ns) const;
  // Now on its ProfileStats' clock, in ns. REQUIRES: valid().
  int64_t NowNs() const;

 private:
  friend class ProfileStats;
  explicit StageHandle(ProfileStage* stage) : stage_(stage) {}
  ProfileStage* stage_ = nullptr;
};

// Times a scope on its stage's clock and records it into the stage when it ends.
class ScopedTimer {
 public:
  explicit ScopedTimer(StageHandle stage);
  ~ScopedTimer() { Stop(); }
  ScopedTimer(ScopedTimer&& other) noexcept;
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;
  ScopedTimer& operator=(ScopedTimer&&) = delete;

  // Records now instead of at scope end; later calls do nothing. Returns the elapsed ns
  // (0 if already stopped).
  int64_t Stop();

 private:
  StageHandle stage_;
  int64_t start_ns_ = 0;
  bool running_ = false;
};

struct StageStats {
  uint64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
  int64_t max_ns = 0;
};

struct StageReport {
  std::string name;
  StageStats window;      // the window just closed
  StageStats cumulative;  // every closed window since start
  // window.total_ns over the window's wall time; above 100 when several threads run the
  // stage at once.
  double percent_of_wall = 0;
};

struct ProfileSnapshot {
  std::string profile_name;
  uint64_t sequence = 0;  // 1 for the first window
  int64_t window_start_ns = 0;  // on the ProfileStats' clock (steady_clock by default)
  int64_t window_end_ns = 0;
  std::vector<StageReport> stages;  // by window total, largest first
  double window_seconds() const { return (window_end_ns - window_start_ns) * 1e-9; }
};

// A table for the log: stage, count, mean/p50/p99/max in ms, % of wall; stages with no
// samples in the window are left out.
std::string FormatProfileTable(const ProfileSnapshot& snapshot);

class ProfileStats {
 public:
  // REQUIRES: `clock` outlives the ProfileStats.
  explicit ProfileStats(std::string name = "profile", const Clock& clock = RealClock());
  ~ProfileStats();
  ProfileStats(const ProfileStats&) = delete;
  ProfileStats& operator=(const ProfileStats&) = delete;

  const std::string& name() const { return name_; }

  // The stage called `name`, created on first use (the only call that allocates).
  StageHandle Stage(std::string_view name) EXCLUDES(stages_mu_);

  void Record(std::string_view stage, int64_t ns) { Stage(stage).Record(ns); }
  ScopedTimer Scope(StageHandle stage) { return ScopedTimer(stage); }
  ScopedTimer Scope(std::string_view stage) { return ScopedTimer(Stage(stage)); }

  // Runs the pre-roll hooks, closes the current window at `now_ns` (default: now on the clock),
  // and returns its snapshot, which also becomes LatestSnapshot(). Calls are serialised.
  ProfileSnapshot RollWindow();
  ProfileSnapshot RollWindow(int64_t now_ns);

  // The snapshot of the last closed window; nullopt before the first roll.
  std::optional<ProfileSnapshot> LatestSnapshot() const EXCLUDES(latest_mu_);

  // `hook` runs at the start of every RollWindow (GPU timers resolve finished events there).
  // Returns an id for RemovePreRollHook. A hook must not call RollWindow.
  int AddPreRollHook(std::function<void()> hook) EXCLUDES(hooks_mu_);
  void RemovePreRollHook(int id) EXCLUDES(hooks_mu_);

 private:
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  const std::string name_;
  const Clock& clock_;
  mutable std::shared_mutex stages_mu_;
  std::vector<std::unique_ptr<ProfileStage>> stages_ GUARDED_BY(stages_mu_);
  std::unordered_map<std::string, ProfileStage*, NameHash, std::equal_to<>> by_name_
      GUARDED_BY(stages_mu_);

  std::mutex roll_mu_;  // serialises RollWindow
  int64_t window_start_ns_ GUARDED_BY(roll_mu_);
  uint64_t sequence_ GUARDED_BY(roll_mu_) = 0;

  mutable std::mutex latest_mu_;
  std::optional<ProfileSnapshot> latest_ GUARDED_BY(latest_mu_);

  std::mutex hooks_mu_;
  std::vector<std::pair<int, std::function<void()>>> hooks_ GUARDED_BY(hooks_mu_);
  int next_hook_id_ GUARDED_BY(hooks_mu_) = 0;
};

}  // namespace tandem
