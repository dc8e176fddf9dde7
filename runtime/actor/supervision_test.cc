// Supervision: restarts after throws and failed Statuses up to max_restarts, exponential
// backoff, the final failure with its cause, errors for pending and later calls, the
// failure hook, stopping an actor in the middle of a restart backoff, and a long call issued
// again across restarts (CallAcrossRestarts).
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/actor/actor_test_util.h"
#include "runtime/actor/relaunch.h"
#include "runtime/actor/system.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using testing::ActorFixture;
using testing::Gate;
using testing::LiveCounted;

std::atomic<int> g_starts{0};

class Flaky : public Actor, public LiveCounted {
 public:
  Flaky() : generation_(g_starts.load()) {}
  Status OnStart() override {
    generation_ = g_starts.fetch_add(1) + 1;
    return Status::Ok();
  }
  int Boom() { throw std::runtime_error("boom"); }
  Status Fail() { return DataLossError("corrupt batch 17"); }
  int Generation() { return generation_; }
  int RestartsSeen() { return context().restarts; }
  void Block(Gate* gate) { gate->Wait(); }

 private:
  int generation_;
};

ActorOptions Restarts(int n, Duration backoff = 1ms) {
  ActorOptions o;
  o.max_restarts = n;
  o.restart_backoff = backoff;
  return o;
}

TEST_F(ActorFixture, RestartsAfterThrowUpToMaxThenFailsWithCause) {
  g_starts = 0;
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Flaky>("flaky", Restarts(2));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h->call(&Flaky::Generation).Get(), 1);
  EXPECT_EQ(*h->call(&Flaky::RestartsSeen).Get(), 0);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    Result<int> r = h->call(&Flaky::Boom).Get();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("boom"), std::string::npos);
    if (attempt <= 2) {
      // A fresh instance (OnStart ran again) serves the next call.
      EXPECT_EQ(*h->call(&Flaky::Generation).Get(), attempt + 1);
      EXPECT_EQ(h->Info().restarts, attempt);
      EXPECT_EQ(*h->call(&Flaky::RestartsSeen).Get(), attempt);  // in its context
    }
  }
  ActorInfo info = h->Info();
  EXPECT_EQ(info.state, ActorState::kFailed);
  EXPECT_EQ(info.restarts, 2);
  EXPECT_EQ(g_starts.load(), 3);
  EXPECT_NE(info.last_error.message().find("boom"), std::string::npos);

  Result<int> after = h->call(&Flaky::Generation).Get();
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(after.status().message().find("actor 'flaky' failed"), std::string::npos);
  EXPECT_NE(after.status().message().find("boom"), std::string::npos);
}

TEST_F(ActorFixture, FailedStatusRestartsAndQueuedCallsRunOnNewInstance) {
  g_starts = 0;
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Flaky>("flaky", Restarts(1));
  ASSERT_TRUE(h.ok());
  Gate gate;
  Future<Unit> blocked = h->call(&Flaky::Block, &gate);
  Future<Unit> failed = h->call(&Flaky::Fail);
  Future<int> next = h->call(&Flaky::Generation);
  gate.Open();
  EXPECT_TRUE(blocked.Get().ok());
  Result<Unit> f = failed.Get();
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("corrupt batch 17"), std::string::npos);
  EXPECT_EQ(*next.Get(), 2);  // queued before the failure, served by the restarted instance
  EXPECT_EQ(h->Info().restarts, 1);
  EXPECT_NE(h->Info().state, ActorState::kFailed);
}

TEST_F(ActorFixture, PendingCallsOfFailedActorResolveToUnavailable) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Flaky>("doomed", Restarts(0));
  ASSERT_TRUE(h.ok());
  std::vector<ActorInfo> hooked;
  std::mutex hook_mu;
  sys.SetFailureHook([&](const ActorInfo& info) {
    std::lock_guard<std::mutex> lock(hook_mu);
    hooked.push_back(info);
  });
  Gate gate;
  Future<Unit> blocked = h->call(&Flaky::Block, &gate);
  Future<int> boom = h->call(&Flaky::Boom);
  std::vector<Future<int>> pending;
  for (int i = 0; i < 5; ++i) pending.push_back(h->call(&Flaky::Generation));
  gate.Open();
  EXPECT_EQ(boom.Get().status().code(), StatusCode::kInternal);
  for (auto& p : pending) {
    Result<int> r = p.Get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(r.status().message().find("actor 'doomed' failed"), std::string::npos);
    EXPECT_NE(r.status().message().find("boom"), std::string::npos);
  }
  // The hook runs after the pending calls are rejected, on the actor's thread.
  ASSERT_TRUE(testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(hook_mu);
    return !hooked.empty();
  }));
  std::lock_guard<std::mutex> lock(hook_mu);
  ASSERT_EQ(hooked.size(), 1u);
  EXPECT_EQ(hooked[0].name, "doomed");
  EXPECT_EQ(hooked[0].state, ActorState::kFailed);
  EXPECT_NE(hooked[0].last_error.message().find("boom"), std::string::npos);
}

class BadStart : public Actor, public LiveCounted {
 public:
  Status OnStart() override { return UnavailableError("model file missing"); }
  int Ping() { return 1; }
};

TEST_F(ActorFixture, OnStartFailureExhaustsRestartsWithExponentialBackoff) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  // Backoffs 20, 40, 80 ms: at least 140 ms before the final failure. A constant backoff
  // would take 60 ms, so this lower bound checks the doubling (upper bounds would be flaky).
  auto start = SteadyClock::now();
  auto h = sys.SpawnActor<BadStart>("badstart", Restarts(3, 20ms));
  ASSERT_TRUE(h.ok());
  Result<int> r = h->call(&BadStart::Ping).Get();
  auto elapsed = SteadyClock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("OnStart: model file missing"), std::string::npos);
  EXPECT_GE(elapsed, 140ms);
  ActorInfo info = h->Info();
  EXPECT_EQ(info.state, ActorState::kFailed);
  EXPECT_EQ(info.restarts, 3);
}

TEST_F(ActorFixture, StopDuringRestartBackoffDoesNotWait) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Flaky>("slowrestart", Restarts(5, 60s));
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->call(&Flaky::Boom).Get().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return h->Info().state == ActorState::kRestarting; }));
  Future<int> queued = h->call(&Flaky::Generation);
  auto start = SteadyClock::now();
  EXPECT_TRUE(sys.StopAll(10s).ok());
  EXPECT_LT(SteadyClock::now() - start, 5s);
  EXPECT_EQ(h->Info().state, ActorState::kStopped);
  EXPECT_EQ(queued.Get().status().code(), StatusCode::kUnavailable);
}

// Fails while it is one of the first `fail_first` instances.
class Worker : public Actor, public LiveCounted {
 public:
  Result<int> Work(int fail_first) {
    if (context().restarts < fail_first) return DataLossError("instance {}", context().restarts);
    return context().restarts;
  }
};

// Runs CallAcrossRestarts on `h` and waits for its one result.
Result<int> WorkAcrossRestarts(ActorHandle<Worker> h, int fail_first, int* relaunches) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<int>> out;
  CallAcrossRestarts<int>(
      h, [h, fail_first] { return h.call(&Worker::Work, fail_first); },
      [relaunches](const Status&) {
        ++*relaunches;
        return true;
      },
      [&](Result<int> r) {
        std::lock_guard<std::mutex> lock(mu);
        EXPECT_FALSE(out.has_value()) << "done ran twice";
        out = std::move(r);
        cv.notify_all();
      });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return out.has_value(); });
  return std::move(*out);
}

TEST_F(ActorFixture, CallAcrossRestartsRunsAgainOnEachFreshInstance) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Worker>("worker", Restarts(3));
  ASSERT_TRUE(h.ok());
  int relaunches = 0;
  Result<int> r = WorkAcrossRestarts(*h, 2, &relaunches);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 2);  // the third instance did the work
  EXPECT_EQ(relaunches, 2);
  EXPECT_EQ(h->Info().restarts, 2);
}

TEST_F(ActorFixture, CallAcrossRestartsEndsWithTheFailureWhenRestartsRunOut) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Worker>("worker", Restarts(1));
  ASSERT_TRUE(h.ok());
  int relaunches = 0;
  Result<int> r = WorkAcrossRestarts(*h, 5, &relaunches);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("instance 1"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(relaunches, 1);
  EXPECT_EQ(h->Info().state, ActorState::kFailed);
}

TEST_F(ActorFixture, CallAcrossRestartsDoesNotRetryAStoppedActor) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Worker>("worker", Restarts(3));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(sys.Stop("worker").ok());
  int relaunches = 0;
  Result<int> r = WorkAcrossRestarts(*h, 5, &relaunches);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(relaunches, 0);
}

}  // namespace
}  // namespace tandem
