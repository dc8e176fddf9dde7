// Clocks. Monotonic time for durations and deadlines; a seam for tests that need to step time.
// Thread-safety: stateless free functions.
#pragma once

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

// Formats a byte count as "1.5 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace tandem
