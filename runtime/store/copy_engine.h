// CopyEngine: the seam through which the store starts asynchronous copies to and from
// objects, and CopyFence: the completion flag of one such copy.
//
// The store holds an object alive (an "in-flight copy" reference) from the moment a copy is
// enqueued until its fence reports completion; only then can the bytes be reused. Two
// engines exist: CudaCopyEngine (cudaMemcpyAsync + event on a given stream; see
// cuda_copy_engine.h) and FakeCopyEngine (a CPU engine whose copies complete only when a test
// says so; see fake_copy_engine.h).
//
// Thread-safety: IsComplete() may be called from any thread, concurrently with Enqueue().
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem {

class CopyFence {
 public:
  virtual ~CopyFence() = default;
  // Non-blocking. True once the copy has finished reading its source and writing its
  // destination; stays true afterwards.
  virtual bool IsComplete() const = 0;
  // Blocks (polling IsComplete with a growing sleep, at most 1 ms) until complete or
  // `timeout` passes; DeadlineExceeded on timeout. For tests and shutdown, not hot paths.
  Status Wait(Duration timeout) const;
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Starts copying `bytes` from `src` to `dst` and returns at once with the copy's fence.
  // The caller must keep both ranges valid until the fence completes (the store does this
  // for its objects).
  virtual Result<std::unique_ptr<CopyFence>> Enqueue(void* dst, const void* src,
                                                     uint64_t bytes) = 0;
  virtual std::string_view name() const = 0;
};

}  // namespace tandem
