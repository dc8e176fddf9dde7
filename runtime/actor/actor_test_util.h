// Test-only helpers for the actor tests: a live-instance count that fixtures check at
// tear-down (no actor instance may outlive its system), and a gate to hold an actor busy.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/actor/actor.h"

namespace tandem::testing {

// Counts live instances of every class deriving from it.
class LiveCounted {
 public:
  LiveCounted() { live().fetch_add(1); }
  LiveCounted(const LiveCounted&) : LiveCounted() {}
  ~LiveCounted() { live().fetch_sub(1); }
  static std::atomic<int>& live() {
    static std::atomic<int> n{0};
    return n;
  }
};

// Fixture asserting that every test actor instance is destroyed by the end of the test.
class ActorFixture : public ::testing::Test {
 protected:
  void SetUp() override { live_at_start_ = LiveCounted::live().load(); }
  void TearDown() override {
    EXPECT_EQ(LiveCounted::live().load(), live_at_start_) << "actor instances leaked";
  }

 private:
  int live_at_start_ = 0;
};

// A one-shot gate: Wait() blocks until Open().
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Polls `cond` every millisecond for up to `timeout`; returns its last value.
inline bool WaitUntil(const std::function<bool()>& cond,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace tandem::testing
