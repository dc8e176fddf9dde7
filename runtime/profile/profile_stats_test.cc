#include "runtime/profile/profile_stats.h"

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/clock.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kMs = 1'000'000;

const StageReport* Find(const ProfileSnapshot& s, const std::string& name) {
  for (const StageReport& r : s.stages) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

TEST(ProfileStatsTest, WindowsRollOverAndCumulativeAccumulates) {
  ProfileStats prof("test");
  EXPECT_FALSE(prof.LatestSnapshot().has_value());
  StageHandle fwd = prof.Stage("fwd");
  for (int i = 0; i < 10; ++i) fwd.Record(1 * kMs);
  prof.Record("bwd", 50 * kMs);
  const int64_t t1 = NowNanos();
  ProfileSnapshot s1 = prof.RollWindow(t1);
  EXPECT_EQ(s1.sequence, 1u);
  ASSERT_EQ(s1.stages.size(), 2u);
  EXPECT_EQ(s1.stages[0].name, "bwd") << "largest window total first";
  const StageReport* f1 = Find(s1, "fwd");
  ASSERT_NE(f1, nullptr);
  EXPECT_EQ(f1->window.count, 10u);
  EXPECT_EQ(f1->window.total_ns, 10 * kMs);
  EXPECT_EQ(f1->window.p50_ns, 1 * kMs);

  for (int i = 0; i < 5; ++i) fwd.Record(3 * kMs);
  ProfileSnapshot s2 = prof.RollWindow(t1 + 100 * kMs);
  EXPECT_EQ(s2.sequence, 2u);
  EXPECT_EQ(s2.window_start_ns, t1);
  EXPECT_DOUBLE_EQ(s2.window_seconds(), 0.1);
  const StageReport* f2 = Find(s2, "fwd");
  ASSERT_NE(f2, nullptr);
  EXPECT_EQ(f2->window.count, 5u) << "the new window holds only its own samples";
  EXPECT_DOUBLE_EQ(f2->window.mean_ns, 3.0 * kMs);
  EXPECT_EQ(f2->window.max_ns, 3 * kMs);
  EXPECT_DOUBLE_EQ(f2->percent_of_wall, 15.0);  // 5 x 3 ms of 100 ms
  EXPECT_EQ(f2->cumulative.count, 15u);
  EXPECT_EQ(f2->cumulative.total_ns, 25 * kMs);
  EXPECT_EQ(f2->cumulative.max_ns, 3 * kMs);
  // Mixed samples: the median comes from a bucket midpoint, within 1/256 of 1 ms.
  EXPECT_NEAR(f2->cumulative.p50_ns, 1 * kMs, kMs / 256.0);
  EXPECT_EQ(Find(s2, "bwd")->window.count, 0u);
  EXPECT_EQ(Find(s2, "bwd")->cumulative.count, 1u);

  ProfileSnapshot s3 = prof.RollWindow(t1 + 200 * kMs);
  EXPECT_EQ(Find(s3, "fwd")->window.count, 0u);
  EXPECT_EQ(Find(s3, "fwd")->cumulative.count, 15u);
  auto latest = prof.LatestSnapshot();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->sequence, 3u);

  const std::string table = FormatProfileTable(s2);
  EXPECT_NE(table.find("fwd"), std::string::npos) << table;
  EXPECT_NE(table.find("3.000"), std::string::npos) << table;
  EXPECT_EQ(table.find("bwd"), std::string::npos) << "stages idle in the window are left out";
}

TEST(ProfileStatsTest, ScopedTimerRecordsOnceOnStopOrScopeEnd) {
  ManualClock clock;
  ProfileStats prof("p", clock);
  {
    auto t = prof.Scope("step");
    clock.Advance(20ms);
    const int64_t elapsed = t.Stop();
    EXPECT_EQ(elapsed, 20 * kMs);
    clock.Advance(5ms);
    EXPECT_EQ(t.Stop(), 0);
  }
  {
    auto a = prof.Scope("step");
    clock.Advance(3ms);
    ScopedTimer b(std::move(a));  // the moved-from timer must not record
    clock.Advance(4ms);
  }
  clock.Advance(1ms);
  ProfileSnapshot s = prof.RollWindow();
  ASSERT_EQ(s.stages.size(), 1u);
  EXPECT_EQ(s.stages[0].window.count, 2u);
  EXPECT_EQ(s.stages[0].window.total_ns, 27 * kMs);  // 20 + (3 + 4): one record each
  EXPECT_EQ(s.window_end_ns - s.window_start_ns, 33 * kMs) << "the window is on the clock too";
}

TEST(ProfileStatsTest, SameNameSameStage) {
  ProfileStats prof;
  StageHandle a = prof.Stage("x");
  StageHandle b = prof.Stage(std::string("x"));
  a.Record(1);
  b.Record(2);
  ProfileSnapshot s = prof.RollWindow();
  ASSERT_EQ(s.stages.size(), 1u);
  EXPECT_EQ(s.stages[0].window.count, 2u);
  EXPECT_EQ(a.name(), "x");
}

// 8 threads record into shared and private stages (creating them concurrently by name)
// while another thread keeps rolling windows; no sample may be lost or counted twice.
TEST(ProfileStatsTest, ConcurrentRecordingFromEightThreads) {
  constexpr int kThreads = 8, kPerThread = 20'000;
  ProfileStats prof;
  std::atomic<bool> done{false};
  std::map<std::string, uint64_t> window_counts;
  std::map<std::string, int64_t> window_totals;
  auto add = [&](const ProfileSnapshot& s) {
    for (const StageReport& r : s.stages) {
      window_counts[r.name] += r.window.count;
      window_totals[r.name] += r.window.total_ns;
    }
  };
  std::thread roller([&] {
    while (!done.load()) {
      add(prof.RollWindow());
      std::this_thread::yield();  // roll as often as the scheduler lets it: no pacing needed
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&prof, t] {
      StageHandle shared = prof.Stage("shared");
      StageHandle mine = prof.Stage("thread." + std::to_string(t));
      for (int i = 0; i < kPerThread; ++i) {
        shared.Record(i % 1000);
        mine.Record(t + 1);
        if (i % 1000 == 0) prof.Record("by_name", 7);
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  roller.join();
  ProfileSnapshot last = prof.RollWindow();
  add(last);

  // sum of (i % 1000) over i < 20000 = 20 * (0 + ... + 999)
  const int64_t shared_total_per_thread = 20 * 999 * 1000 / 2;
  EXPECT_EQ(window_counts["shared"], uint64_t{kThreads * kPerThread});
  EXPECT_EQ(window_totals["shared"], kThreads * shared_total_per_thread);
  EXPECT_EQ(window_counts["by_name"], uint64_t{kThreads * kPerThread / 1000});
  for (int t = 0; t < kThreads; ++t) {
    const std::string name = "thread." + std::to_string(t);
    EXPECT_EQ(window_counts[name], uint64_t{kPerThread}) << name;
    EXPECT_EQ(window_totals[name], int64_t{kPerThread} * (t + 1)) << name;
  }
  const StageReport* shared = Find(last, "shared");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->cumulative.count, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(shared->cumulative.max_ns, 999);
  // The true median is 499; above 256 ns buckets are 1/128 wide, so within 499/256.
  EXPECT_NEAR(shared->cumulative.p50_ns, 499, 499 / 256.0);
  EXPECT_EQ(last.stages.size(), size_t{kThreads + 2});
}

TEST(ProfileStatsTest, PreRollHooksRunBeforeEachRollUntilRemoved) {
  ProfileStats prof;
  StageHandle gpu = prof.Stage("gpu");
  int id = prof.AddPreRollHook([&] { gpu.Record(5); });  // as a GPU poller would
  EXPECT_EQ(Find(prof.RollWindow(), "gpu")->window.count, 1u)
      << "a hook's samples land in the window it closes";
  prof.RemovePreRollHook(id);
  EXPECT_EQ(Find(prof.RollWindow(), "gpu")->window.count, 0u);
}

}  // namespace
}  // namespace tandem
