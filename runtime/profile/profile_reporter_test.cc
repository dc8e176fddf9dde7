#include "runtime/profile/profile_reporter.h"

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
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { log::SetSink(nullptr); }
  std::string All() {
    std::lock_guard lock(mu_);
    std::string all;
    for (const auto& l : lines_) all += l + "\n";
    return all;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(ProfileReporterTest, ReportsPeriodicallyAndOnStop) {
  LogCapture logs;
  ProfileStats prof("reporter_test");
  StageHandle step = prof.Stage("loop.step");
  ProfileReporter reporter(&prof, 20ms);
  step.Record(2'000'000);
  const auto deadline = SteadyClock::now() + 10s;
  // The reporter publishes the snapshot before it logs the table, so wait for both: the
  // log line may come a moment after the snapshot (it did under ASan on a loaded machine).
  while (true) {
    auto s = prof.LatestSnapshot();
    if (s && s->stages.size() == 1 && s->stages[0].cumulative.count == 1 &&
        logs.All().find("loop.step") != std::string::npos)
      break;
    ASSERT_LT(SteadyClock::now(), deadline) << "no report within 10 s: " << logs.All();
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_NE(logs.All().find("loop.step"), std::string::npos) << logs.All();
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
    ProfileReporter reporter(&prof, Duration::zero());
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(prof.LatestSnapshot().has_value());
}

}  // namespace
}  // namespace tandem
