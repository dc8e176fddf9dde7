// Allocators that carve one fixed byte range (the pinned arena) into objects.
//
// The store never asks the OS or CUDA for memory after start-up; it hands out offsets into
// the arena through an ArenaAllocator. The default is a two-level segregated-fit allocator
// (TLSF style): free blocks sit in size-class bins found through two bitmaps, so allocate and
// free are O(1); neighbouring free blocks are coalesced at once on free; every size is
// rounded up to the alignment, so every offset is aligned.
//
// Thread-safety: an ArenaAllocator is NOT thread-safe; its owner (ObjectStore) serialises
// calls under its own mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "runtime/core/status.h"

namespace tandem {

// One allocated range. `handle` is the allocator's own bookkeeping id; pass the whole value
// back to Free().
struct Allocation {
  uint64_t offset = 0;  // from the arena base; a multiple of alignment()
  uint64_t size = 0;    // bytes reserved (the request rounded up to alignment())
  uint32_t handle = 0;
};

struct AllocatorStats {
  uint64_t capacity = 0;
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t largest_free_block = 0;
  uint64_t free_blocks = 0;
  uint64_t live_allocations = 0;
  // 0 when all free bytes are one block; near 1 when free space is in many small pieces.
  double fragmentation() const {
    return free_bytes == 0 ? 0.0
                           : 1.0 - static_cast<double>(largest_free_block) /
                                       static_cast<double>(free_bytes);
  }
};

class ArenaAllocator {
 public:
  virtual ~ArenaAllocator() = default;

  // Reserves at least `bytes` (0 counts as 1), aligned to alignment(); nullopt when no free
  // block is large enough.
  virtual std::optional<Allocation> Allocate(uint64_t bytes) = 0;
  // REQUIRES: `a` came from Allocate() on this allocator and was not freed since.
  virtual void Free(const Allocation& a) = 0;

  virtual AllocatorStats Stats() const = 0;
  // Walks every block and checks the allocator's invariants (blocks tile the arena, no two
  // free neighbours, bins hold exactly the free blocks). For tests; O(blocks).
  virtual Status CheckConsistency() const = 0;

  virtual uint64_t capacity() const = 0;
  virtual uint64_t alignment() const = 0;
};

// REQUIRES: alignment is a power of two >= 16. `capacity` is rounded down to alignment.
std::unique_ptr<ArenaAllocator> NewSegregatedFitAllocator(uint64_t capacity, uint64_t alignment);

}  // namespace tandem
