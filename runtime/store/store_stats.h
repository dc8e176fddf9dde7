// StoreStats: a point-in-time snapshot of an ObjectStore, for `tandem status`, metrics and
// error messages. Plain values; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/store/allocator.h"
#include "runtime/store/arena.h"

namespace tandem {

// References of one kind, and the objects (and their bytes) that have at least one.
struct HolderStats {
  uint64_t refs = 0;
  uint64_t objects = 0;
  uint64_t bytes = 0;
};

// What one owner (the name given to ObjectStore::Create) holds right now.
struct OwnerStats {
  std::string owner;
  uint64_t objects = 0;
  uint64_t bytes = 0;  // reserved bytes, alignment included
  uint64_t unsealed = 0;
  uint64_t local_refs = 0;
  uint64_t channel_refs = 0;
  uint64_t inflight_copies = 0;
};

struct StoreStats {
  std::string name;
  uint32_t node_id = 0;
  uint32_t store_id = 0;
  ArenaKind arena_kind = ArenaKind::kHostPages;
  uint64_t capacity = 0;
  uint64_t bytes_used = 0;
  uint64_t high_water = 0;       // most bytes_used ever seen
  uint64_t live_objects = 0;
  uint64_t inflight_copies = 0;  // enqueued copies whose fence has not been seen complete
  AllocatorStats allocator;      // free bytes, largest free block, fragmentation
  uint64_t creates = 0;
  uint64_t frees = 0;
  uint64_t create_waits = 0;     // creates that had to wait for memory
  uint64_t create_timeouts = 0;  // creates that gave up with OutOfMemory
  uint64_t reaper_polls = 0;     // fence polls the reaper thread has made
  HolderStats local;
  HolderStats channel;
  HolderStats inflight;
  std::vector<OwnerStats> owners;  // owners holding objects, most bytes first

  // One line per owner: "'target': 31 objects, 62.0 MiB (local refs 2, ...)".
  std::string HoldersSummary() const;
  // A multi-line report for status tools.
  std::string ToString() const;
};

}  // namespace tandem
