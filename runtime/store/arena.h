// PinnedArena: the one big region every store object lives in, allocated once at start-up.
//
// With CUDA built in and a device visible, the region comes from cudaHostAlloc (page-locked,
// so cudaMemcpyAsync to and from it is truly asynchronous); otherwise it is page-aligned
// anonymous host memory from mmap. Nothing is allocated from the OS or CUDA after Create().
//
// Thread-safety: immutable after Create(); the bytes themselves are shared by the objects
// carved from them (see ObjectStore).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "runtime/core/status.h"

namespace tandem {

enum class ArenaBacking {
  kAuto,        // CUDA pinned memory when a device is present, host pages otherwise
  kHostPages,   // always page-aligned host memory (tests, CPU-only runs)
};

enum class ArenaKind { kCudaPinned, kHostPages };
std::string_view ArenaKindName(ArenaKind kind);

class PinnedArena {
 public:
  // Reserves `bytes` (rounded up to the page size) and touches every page, so later use
  // never faults. Fails with OutOfMemory (or CudaError) naming the size when the OS or CUDA
  // refuses.
  static Result<std::unique_ptr<PinnedArena>> Create(uint64_t bytes, ArenaBacking backing);
  ~PinnedArena();
  PinnedArena(const PinnedArena&) = delete;
  PinnedArena& operator=(const PinnedArena&) = delete;

  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  ArenaKind kind() const { return kind_; }

 private:
  PinnedArena(uint8_t* base, uint64_t size, ArenaKind kind)
      : base_(base), size_(size), kind_(kind) {}
  uint8_t* base_;
  uint64_t size_;
  ArenaKind kind_;
};

}  // namespace tandem
