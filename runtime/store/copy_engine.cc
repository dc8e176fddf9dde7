#include "runtime/store/copy_engine.h"

#include <algorithm>
#include <thread>

namespace tandem {

Status CopyFence::Wait(Duration timeout) const {
  const TimePoint deadline = SteadyClock::now() + timeout;
  Duration nap = std::chrono::microseconds(10);
  while (!IsComplete()) {
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceededError("copy fence still pending after {} ms",
                                   std::chrono::duration_cast<std::chrono::milliseconds>(timeout)
                                       .count());
    }
    std::this_thread::sleep_for(nap);
    nap = std::min<Duration>(nap * 2, std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

}  // namespace tandem
