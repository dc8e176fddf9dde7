#include "runtime/profile/profile_stats.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/core/clock.h"
#include "runtime/profile/latency_histogram.h"

#ifdef TANDEM_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace tandem {

// Recorders write windows_[current_] under mu_. RollWindow flips current_ under mu_ and then
// owns the other window (and cumulative_) alone, under ProfileStats::roll_mu_, so the
// recorders' critical section is one histogram increment.
class ProfileStage {
 public:
  ProfileStage(std::string name, const Clock& clock) : name_(std::move(name)), clock_(clock) {}

  const std::string& name() const { return name_; }
  int64_t NowNs() const { return clock_.Now().time_since_epoch().count(); }

  void Record(int64_t ns) {
    std::lock_guard lock(mu_);
    windows_[current_].Add(ns);
  }

  // Called only under ProfileStats::roll_mu_.
  StageReport Roll(int64_t window_ns) {
    int retired;
    {
      std::lock_guard lock(mu_);
      retired = current_;
      current_ ^= 1;
    }
    LatencyHistogram& window = windows_[retired];
    cumulative_.Merge(window);
    StageReport r;
    r.name = name_;
    r.window = Summarize(window);
    r.cumulative = Summarize(cumulative_);
    r.percent_of_wall = window_ns > 0 ? 100.0 * window.total_ns() / window_ns : 0.0;
    window.Clear();
    return r;
  }

 private:
  static StageStats Summarize(const LatencyHistogram& h) {
    StageStats s;
    s.count = h.count();
    s.total_ns = h.total_ns();
    s.mean_ns = h.mean_ns();
    s.p50_ns = h.Percentile(50);
    s.p99_ns = h.Percentile(99);
    s.max_ns = h.max_ns();
    return s;
  }

  const std::string name_;
  const Clock& clock_;
  std::mutex mu_;
  int current_ GUARDED_BY(mu_) = 0;
  LatencyHistogram windows_[2];
  LatencyHistogram cumulative_;
};

const std::string& StageHandle::name() const { return stage_->name(); }

void StageHandle::Record(int64_t ns) const { stage_->Record(ns); }

int64_t StageHandle::NowNs() const { return stage_->NowNs(); }

ScopedTimer::ScopedTimer(StageHandle stage) : stage_(stage), running_(stage.valid()) {
#ifdef TANDEM_HAVE_CUDA
  if (running_) nvtxRangePushA(stage_.name().c_str());
#endif
  if (running_) start_ns_ = stage_.NowNs();
}

ScopedTimer::ScopedTimer(ScopedTimer&& other) noexcept
    : stage_(other.stage_), start_ns_(other.start_ns_), running_(other.running_) {
  other.running_ = false;
}

int64_t ScopedTimer::Stop() {
  if (!running_) return 0;
  running_ = false;
  const int64_t elapsed = stage_.NowNs() - start_ns_;
  stage_.Record(elapsed);
#ifdef TANDEM_HAVE_CUDA
  nvtxRangePop();
#endif
  return elapsed;
}

ProfileStats::ProfileStats(std::string name, const Clock& clock)
    : name_(std::move(name)), clock_(clock),
      window_start_ns_(clock.Now().time_since_epoch().count()) {}

ProfileStats::~ProfileStats() = default;

StageHandle ProfileStats::Stage(std::string_view name) {
  {
    std::shared_lock lock(stages_mu_);
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return StageHandle(it->second);
  }
  std::unique_lock lock(stages_mu_);
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return StageHandle(it->second);
  stages_.push_back(std::make_unique<ProfileStage>(std::string(name), clock_));
  ProfileStage* stage = stages_.back().get();
  by_name_.emplace(stage->name(), stage);
  return StageHandle(stage);
}

ProfileSnapshot ProfileStats::RollWindow() {
  return RollWindow(clock_.Now().time_since_epoch().count());
}

ProfileSnapshot ProfileStats::RollWindow(int64_t now_ns) {
  {
    std::lock_guard lock(hooks_mu_);
    for (auto& [id, hook] : hooks_) hook();
  }
  std::vector<ProfileStage*> stages;
  {
    std::shared_lock lock(stages_mu_);
    for (auto& s : stages_) stages.push_back(s.get());
  }
  std::lock_guard roll(roll_mu_);
  ProfileSnapshot snap;
  snap.profile_name = name_;
  snap.sequence = ++sequence_;
  snap.window_start_ns = window_start_ns_;
  snap.window_end_ns = now_ns;
  window_start_ns_ = now_ns;
  for (ProfileStage* s : stages) snap.stages.push_back(s->Roll(now_ns - snap.window_start_ns));
  std::stable_sort(snap.stages.begin(), snap.stages.end(),
                   [](const StageReport& a, const StageReport& b) {
                     return a.window.total_ns > b.window.total_ns;
                   });
  std::lock_guard lock(latest_mu_);
  latest_ = snap;
  return snap;
}

std::optional<ProfileSnapshot> ProfileStats::LatestSnapshot() const {
  std::lock_guard lock(latest_mu_);
  return latest_;
}

int ProfileStats::AddPreRollHook(std::function<void()> hook) {
  std::lock_guard lock(hooks_mu_);
  hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void ProfileStats::RemovePreRollHook(int id) {
  std::lock_guard lock(hooks_mu_);
  std::erase_if(hooks_, [id](const auto& h) { return h.first == id; });
}

std::string FormatProfileTable(const ProfileSnapshot& snap) {
  std::string out = fmt::format("profile '{}' window #{} ({:.2f} s)\n", snap.profile_name,
                                snap.sequence, snap.window_seconds());
  out += fmt::format("{:<36} {:>8} {:>11} {:>11} {:>11} {:>11} {:>7}\n", "stage", "count",
                     "mean ms", "p50 ms", "p99 ms", "max ms", "% wall");
  for (const StageReport& r : snap.stages) {
    if (r.window.count == 0) continue;
    out += fmt::format("{:<36} {:>8} {:>11.3f} {:>11.3f} {:>11.3f} {:>11.3f} {:>7.1f}\n", r.name,
                       r.window.count, r.window.mean_ns * 1e-6, r.window.p50_ns * 1e-6,
                       r.window.p99_ns * 1e-6, r.window.max_ns * 1e-6, r.percent_of_wall);
  }
  return out;
}

}  // namespace tandem
