#include "runtime/profile/profile_reporter.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/logging.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;

class EnvGuard {
 public:
  explicit EnvGuard(const char* value) {
    if (value) {
      setenv(kProfileIntervalEnv, value, 1);
    } else {
      unsetenv(kProfileIntervalEnv);
    }
  }
  ~EnvGuard() { unsetenv(kProfileIntervalEnv); }
};

TEST(ProfileIntervalTest, EnvironmentWinsOverJobWhichWinsOverDefault) {
  {
    EnvGuard env(nullptr);
    EXPECT_EQ(*ResolveProfileInterval(std::nullopt), 60s);
    EXPECT_EQ(*ResolveProfileInterval(2.5), 2500ms);
    EXPECT_EQ(*ResolveProfileInterval(0.0), Duration::zero());
    auto neg = ResolveProfileInterval(-1.0);
    ASSERT_EQ(neg.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(neg.status().message().find("[profile] interval_s"), std::string::npos);
  }
  {
    EnvGuard env("0.25");
    EXPECT_EQ(*ResolveProfileInterval(60.0), 250ms);
  }
  {
    EnvGuard env("sixty");
    auto bad = ResolveProfileInterval(60.0);
    ASSERT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("TANDEM_PROFILE_INTERVAL='sixty'"), std::string::npos)
        << bad.status().message();
  }
}

// Captures log lines for the test's lifetime.
class LogCapture {
 public:
  LogCapture() {
    log::SetSink([this](log::Level, std::string_view line) {
      {
        std::lock_guard lock(mu_);
        lines_.emplace_back(line);
      }
      cv_.notify_all();
    });
  }
  ~LogCapture() { log::SetSink(nullptr); }
  std::string All() {
    std::lock_guard lock(mu_);
    return AllLocked();
  }
  // Waits until a captured line contains `text`; false after `timeout` (a hang guard, not
  // a timing assertion: the wait ends as soon as the line is logged).
  bool WaitFor(std::string_view text, Duration timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout,
                        [&] { return AllLocked().find(text) != std::string::npos; });
  }

 private:
  std::string AllLocked() {
    std::string all;
    for (const auto& l : lines_) all += l + "\n";
    return all;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

TEST(ProfileReporterTest, ReportsPeriodicallyAndOnStop) {
  LogCapture logs;
  ProfileStats prof("reporter_test");
  StageHandle step = prof.Stage("loop.step");
  ProfileReporter reporter(&prof, 20ms);
  step.Record(2'000'000);
  // The table lists only stages with samples in its window, so the line naming loop.step
  // is the report of the window holding the record; the reporter publishes that window's
  // snapshot before it logs the table (it may have rolled empty windows before it, when
  // the record came late on a loaded machine).
  ASSERT_TRUE(logs.WaitFor("loop.step", 60s)) << "no report: " << logs.All();
  auto s = prof.LatestSnapshot();
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->stages.size(), 1u);
  EXPECT_EQ(s->stages[0].cumulative.count, 1u);
  EXPECT_NE(logs.All().find("profile 'reporter_test'"), std::string::npos);

  step.Record(4'000'000);
  const uint64_t before = prof.LatestSnapshot()->sequence;
  reporter.Stop();
  auto final_snap = prof.LatestSnapshot();
  EXPECT_GT(final_snap->sequence, before) << "Stop reports the partial window";
  EXPECT_EQ(final_snap->stages[0].cumulative.count, 2u);
  reporter.Stop();  // idempotent
}

TEST(ProfileReporterTest, ZeroIntervalStartsNoThread) {
  ProfileStats prof;
  prof.Record("x", 1);
  {
    // No wait needed: a started thread would report the recorded stage when the reporter
    // stops (as ReportsPeriodicallyAndOnStop shows), and there would be a snapshot.
    ProfileReporter reporter(&prof, Duration::zero());
  }
  EXPECT_FALSE(prof.LatestSnapshot().has_value());
}

}  // namespace
}  // namespace tandem
