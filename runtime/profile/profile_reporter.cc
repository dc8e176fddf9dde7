#include "runtime/profile/profile_reporter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "runtime/core/logging.h"

namespace tandem {

namespace {

Result<Duration> SecondsToDuration(double seconds, std::string_view source) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) {
    return InvalidArgumentError("{} = {} is not a valid interval; give seconds >= 0 (0 = off)",
                                source, seconds);
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Result<Duration> ResolveProfileInterval(std::optional<double> job_interval_s) {
  if (const char* env = std::getenv(kProfileIntervalEnv); env != nullptr && *env != '\0') {
    char* end = nullptr;
    errno = 0;
    const double seconds = std::strtod(env, &end);
    if (errno != 0 || end == env || *end != '\0') {
      return InvalidArgumentError("{}='{}' is not a number of seconds (e.g. {}=60, 0 = off)",
                                  kProfileIntervalEnv, env, kProfileIntervalEnv);
    }
    return SecondsToDuration(seconds, kProfileIntervalEnv);
  }
  if (job_interval_s) return SecondsToDuration(*job_interval_s, "[profile] interval_s");
  return kDefaultProfileInterval;
}

ProfileReporter::ProfileReporter(ProfileStats* stats, Duration interval)
    : stats_(stats), interval_(interval) {
  if (interval_ > Duration::zero()) thread_ = std::thread([this] { Run(); });
}

ProfileReporter::~ProfileReporter() { Stop(); }

void ProfileReporter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProfileReporter::Run() {
  std::unique_lock lock(mu_);
  TimePoint next = SteadyClock::now() + interval_;
  while (true) {
    if (cv_.wait_until(lock, next, [this] { return stopping_; })) break;
    next = std::max(next + interval_, SteadyClock::now());
    lock.unlock();
    Report();
    lock.lock();
  }
  lock.unlock();
  Report();
}

void ProfileReporter::Report() {
  ProfileSnapshot snap = stats_->RollWindow();
  bool any = false;
  for (const StageReport& r : snap.stages) any = any || r.window.count > 0;
  if (!any) return;
  std::string table = FormatProfileTable(snap);
  if (!table.empty() && table.back() == '\n') table.pop_back();
  TLOG_INFO("{}", table);
}

}  // namespace tandem
