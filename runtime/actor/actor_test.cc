// Actor basics: calls and their return kinds, one-at-a-time ordered mailboxes, pinned
// threads, log prefixes, stages, and graceful stop.
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/actor/actor_test_util.h"
#include "runtime/actor/system.h"
#include "runtime/core/logging.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using testing::ActorFixture;
using testing::Gate;
using testing::LiveCounted;

class Calc : public Actor, public LiveCounted {
 public:
  int64_t Add(int64_t v) { return total_ += v; }
  void Reset() { total_ = 0; }
  Status Check(int64_t expected) const {
    return total_ == expected ? Status::Ok() : InvalidArgumentError("total is {}", total_);
  }
  Result<std::string> Describe() { return fmt::format("total={}", total_); }
  std::string Prefix() { return log::ThreadPrefix(); }
  std::thread::id ThreadId() { return std::this_thread::get_id(); }
  int Throw() { throw std::runtime_error("calc exploded"); }
  int Gpu() { return context().gpu; }
  void Stage(std::string s) { SetStage(std::move(s)); }
  size_t Consume(std::unique_ptr<std::vector<int>> v) { return v->size(); }

 private:
  int64_t total_ = 0;
};

TEST_F(ActorFixture, CallReturnsValuesStatusesAndResults) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Calc>("calc");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(*h->call(&Calc::Add, 5).Get(), 5);
  EXPECT_EQ(*h->call(&Calc::Add, int64_t{7}).Get(), 12);
  EXPECT_TRUE(h->call(&Calc::Check, 12).Get().ok());
  EXPECT_EQ(*h->call(&Calc::Describe).Get(), "total=12");
  h->tell(&Calc::Reset);
  EXPECT_EQ(*h->call(&Calc::Describe).Get(), "total=0");
  EXPECT_EQ(*h->call(&Calc::Consume, std::make_unique<std::vector<int>>(3)).Get(), 3u);
  // Future<Unit> for void.
  Future<Unit> done = h->call(&Calc::Reset);
  EXPECT_TRUE(done.Get().ok());
  EXPECT_EQ(h->Info().state, ActorState::kRunning);
  EXPECT_EQ(h->address().node, 0u);
  EXPECT_GT(h->address().id, 0u);
}

TEST_F(ActorFixture, ThrowBecomesErrorNamingTheActor) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Calc>("thrower");
  ASSERT_TRUE(h.ok());
  Result<int> r = h->call(&Calc::Throw).Get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("actor 'thrower'"), std::string::npos);
  EXPECT_NE(r.status().message().find("calc exploded"), std::string::npos);
}

TEST_F(ActorFixture, ThreadPrefixIsActorName) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto a = sys.SpawnActor<Calc>("alpha");
  auto b = sys.SpawnActor<Calc>("beta");
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(*a->call(&Calc::Prefix).Get(), "alpha");
    EXPECT_EQ(*b->call(&Calc::Prefix).Get(), "beta");
  }
}

// Records every message and checks that no two ever overlap in time.
class Recorder : public Actor, public LiveCounted {
 public:
  void Record(int sender, int seq) {
    if (in_flight_.fetch_add(1) != 0) overlaps_.fetch_add(1);
    // Widen any overlap window: stay in flight for 20 us of wall time, spinning. Not
    // yields: on a loaded machine each yield can hand the core to another process for a
    // whole time slice, so 50 of them per message made this suite's 2,400 messages take
    // 82 s (past this test's 120 s timeout under ctest -j4 with a CPU hog).
    const auto until = std::chrono::steady_clock::now() + 20us;
    while (std::chrono::steady_clock::now() < until) {
    }
    log_.emplace_back(sender, seq);
    in_flight_.fetch_sub(1);
  }
  std::vector<std::pair<int, int>> Log() { return log_; }
  int Overlaps() { return overlaps_.load(); }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<int> overlaps_{0};
  std::vector<std::pair<int, int>> log_;  // touched only by the actor's messages
};

TEST_F(ActorFixture, MessagesRunOneAtATimeInSenderOrder) {
  constexpr int kSenders = 4;
  constexpr int kPerSender = 300;
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 4});
  auto h = sys.SpawnActor<Recorder>("recorder");
  ASSERT_TRUE(h.ok());
  std::vector<std::thread> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      for (int i = 0; i < kPerSender; ++i) {
        if (i % 2 == 0) {
          h->tell(&Recorder::Record, s, i);
        } else {
          (void)h->call(&Recorder::Record, s, i);  // future dropped: still runs, in order
        }
      }
    });
  }
  for (auto& t : senders) t.join();
  std::vector<std::pair<int, int>> log = *h->call(&Recorder::Log).Get();
  ASSERT_EQ(log.size(), size_t{kSenders * kPerSender});
  std::vector<int> next(kSenders, 0);
  for (auto [sender, seq] : log) {
    ASSERT_EQ(seq, next[sender]) << "sender " << sender << " out of order";
    ++next[sender];
  }
  EXPECT_EQ(*h->call(&Recorder::Overlaps).Get(), 0);
  EXPECT_EQ(h->Info().messages_done, uint64_t{kSenders * kPerSender + 2});
}

TEST_F(ActorFixture, ManyActorsOnSmallPoolNeverOverlap) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 3});
  std::vector<ActorHandle<Recorder>> actors;
  for (int a = 0; a < 6; ++a) {
    auto h = sys.SpawnActor<Recorder>(fmt::format("rec/{}", a));
    ASSERT_TRUE(h.ok());
    actors.push_back(*h);
  }
  for (int i = 0; i < 200; ++i) {
    for (auto& h : actors) h.tell(&Recorder::Record, 0, i);
  }
  for (auto& h : actors) {
    std::vector<std::pair<int, int>> log = *h.call(&Recorder::Log).Get();
    ASSERT_EQ(log.size(), 200u);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(log[i].second, i);
    EXPECT_EQ(*h.call(&Recorder::Overlaps).Get(), 0);
  }
}

TEST_F(ActorFixture, GpuActorOwnsOnePinnedThread) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  ActorOptions opts;
  opts.gpu = 1;
  opts.make_device_current = false;  // a fake GPU: this machine may have none
  auto g = sys.SpawnActor<Calc>("gpu-actor", opts);
  auto c = sys.SpawnActor<Calc>("cpu-actor");
  ASSERT_TRUE(g.ok() && c.ok());
  EXPECT_EQ(*g->call(&Calc::Gpu).Get(), 1);
  EXPECT_EQ(*c->call(&Calc::Gpu).Get(), -1);
  std::set<std::thread::id> gpu_threads, cpu_threads;
  for (int i = 0; i < 20; ++i) {
    gpu_threads.insert(*g->call(&Calc::ThreadId).Get());
    cpu_threads.insert(*c->call(&Calc::ThreadId).Get());
  }
  ASSERT_EQ(gpu_threads.size(), 1u);
  EXPECT_EQ(cpu_threads.count(*gpu_threads.begin()), 0u);
  EXPECT_EQ(g->Info().gpu, 1);
}

TEST_F(ActorFixture, StageIsVisibleInSnapshots) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Calc>("staged");
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->call(&Calc::Stage, std::string("forward")).Get().ok());
  std::vector<ActorInfo> snap = sys.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].name, "staged");
  EXPECT_EQ(snap[0].stage, "forward");
  EXPECT_EQ(snap[0].state, ActorState::kRunning);
}

// Counts messages and records whether OnStop ran after all of them.
class Drainer : public Actor, public LiveCounted {
 public:
  explicit Drainer(const ConfigValue&, const ActorContext& ctx) {}
  int Work(Gate* gate) {
    if (gate != nullptr) gate->Wait();
    return ++done_;
  }
  Status OnStop() override {
    stopped_after_->store(done_);
    return Status::Ok();
  }
  static std::atomic<int>* stopped_after_;

 private:
  int done_ = 0;
};
std::atomic<int>* Drainer::stopped_after_ = nullptr;

TEST_F(ActorFixture, GracefulStopDrainsMailboxThenRunsOnStop) {
  std::atomic<int> stopped_after{-1};
  Drainer::stopped_after_ = &stopped_after;
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Drainer>("drainer");
  ASSERT_TRUE(h.ok());
  Gate gate;
  std::vector<Future<int>> futures;
  futures.push_back(h->call(&Drainer::Work, &gate));  // holds the actor busy
  for (int i = 0; i < 30; ++i) futures.push_back(h->call(&Drainer::Work, nullptr));
  ASSERT_TRUE(testing::WaitUntil([&] { return h->Info().mailbox_depth == 30; }));

  std::thread stopper([&] { EXPECT_TRUE(sys.StopAll(10s).ok()); });
  ASSERT_TRUE(testing::WaitUntil([&] { return h->Info().state == ActorState::kStopping; }));
  // New calls are refused once the stop is requested; queued ones still run.
  Result<int> late = h->call(&Drainer::Work, nullptr).Get();
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("drainer"), std::string::npos);
  gate.Open();
  stopper.join();
  for (int i = 0; i < 31; ++i) EXPECT_EQ(*futures[i].Get(), i + 1);
  EXPECT_EQ(stopped_after.load(), 31);
  EXPECT_EQ(h->Info().state, ActorState::kStopped);
  EXPECT_EQ(h->call(&Drainer::Work, nullptr).Get().status().code(), StatusCode::kUnavailable);
}

// A producer-style loop that runs until asked to stop.
class Looper : public Actor, public LiveCounted {
 public:
  int Run() {
    int n = 0;
    while (!stop_requested()) {
      ++n;
      std::this_thread::yield();  // the "work"; the test stops it at once
    }
    return n;
  }
};

TEST_F(ActorFixture, LongRunningMethodSeesStopRequest) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto h = sys.SpawnActor<Looper>("looper");
  ASSERT_TRUE(h.ok());
  Future<int> loop = h->call(&Looper::Run);
  EXPECT_TRUE(sys.StopAll(10s).ok());
  Result<int> n = loop.Get();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(h->Info().state, ActorState::kStopped);
}

}  // namespace
}  // namespace tandem
