// FakeCopyEngine: a CPU copy engine for tests whose copies complete only when the test says
// so. Enqueue() only records the copy; CompleteOldest()/CompleteAll() perform the memcpy at
// that moment and then mark the fence complete, so a test can hold a copy "in flight" for as
// long as it likes and then check that the bytes it read were still intact.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include "runtime/core/thread_annotations.h"
#include "runtime/store/copy_engine.h"

namespace tandem {

class FakeCopyEngine final : public CopyEngine {
 public:
  Result<std::unique_ptr<CopyFence>> Enqueue(void* dst, const void* src,
                                             uint64_t bytes) override;
  std::string_view name() const override { return "fake-cpu"; }

  // Performs the oldest pending copy and completes its fence; false when none is pending.
  bool CompleteOldest() EXCLUDES(mu_);
  // Completes every pending copy in order; returns how many.
  size_t CompleteAll() EXCLUDES(mu_);
  size_t pending() const EXCLUDES(mu_);

 private:
  struct Copy {
    void* dst;
    const void* src;
    uint64_t bytes;
    std::shared_ptr<std::atomic<bool>> done;
  };
  mutable std::mutex mu_;
  std::deque<Copy> queue_ GUARDED_BY(mu_);
};

}  // namespace tandem
