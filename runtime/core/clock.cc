#include "runtime/core/clock.h"

#include <fmt/format.h>

namespace tandem {
namespace {

class SteadyClockSource final : public Clock {
 public:
  TimePoint Now() const override { return SteadyClock::now(); }
};

}  // namespace

const Clock& RealClock() {
  static const SteadyClockSource clock;
  return clock;
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace tandem
