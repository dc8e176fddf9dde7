// Clocks. Monotonic time for durations and deadlines; a seam for tests that need to step time.
//
// `Clock` is the seam: what measures a duration takes one (`RealClock()` by default) and a
// test passes a `ManualClock` it steps by hand, so an assertion on a measured time is exact
// instead of racing a sleep on a loaded machine.
//
// Thread-safety: the free functions are stateless; RealClock() and ManualClock may be read
// and (ManualClock) stepped from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace tandem {

using SteadyClock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;
using TimePoint = SteadyClock::time_point;

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

inline double SecondsSince(TimePoint start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic: never less than an earlier Now() of the same clock.
  virtual TimePoint Now() const = 0;
};

// The steady clock (process-lifetime, stateless).
const Clock& RealClock();

// Time that moves only when the test says: starts at `start` and Advance() steps it.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}) : ns_(start.time_since_epoch().count()) {}
  TimePoint Now() const override {
    return TimePoint(Duration(ns_.load(std::memory_order_acquire)));
  }
  // REQUIRES: d >= 0.
  void Advance(Duration d) { ns_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> ns_;
};

// Formats a byte count as "1.5 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace tandem
