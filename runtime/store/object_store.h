// ObjectStore: shared pinned-memory objects with reference counts and copy fences.
//
// All objects live in one PinnedArena allocated when the store opens. Create() reserves a
// range (waiting, with a timeout, while the arena is full: backpressure, never dropping
// data), MutableObject::Seal() makes it read-only, and ObjectRef handles count who holds it.
// CopyOut()/CopyInto() start an asynchronous copy through a CopyEngine and keep the object
// alive with an in-flight reference until the copy's fence completes.
//
// The invariant (docs/architecture.md): an object's bytes return to the allocator only when its
// reference count (local + channel + in-flight copies) is zero, so never while a copy may
// still read or write them. Fences are polled without blocking: on allocation attempts
// that find no room, by a reaper thread every `reaper_interval`, and by PollFences().
//
// Thread-safety: every method is safe to call from any thread. The store must outlive every
// ObjectRef and MutableObject it made; destroying it with objects alive aborts, naming the
// holders.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/store/allocator.h"
#include "runtime/store/arena.h"
#include "runtime/store/copy_engine.h"
#include "runtime/store/object_ref.h"
#include "runtime/store/store_stats.h"

namespace tandem {

struct StoreOptions {
  std::string name = "store";
  uint64_t capacity_bytes = uint64_t{256} << 20;
  uint64_t alignment = 256;  // every object starts on this boundary; power of two >= 16
  uint32_t node_id = 0;
  uint32_t store_id = 0;
  ArenaBacking backing = ArenaBacking::kAuto;
  Duration create_timeout = std::chrono::seconds(30);  // for Create() without a timeout
  // How often the reaper polls pending fences; zero runs no reaper thread (fences are then
  // polled only by allocation attempts and PollFences()).
  Duration reaper_interval = std::chrono::milliseconds(1);
};

class ObjectStore {
 public:
  // Allocates the arena (the only allocation from CUDA or the OS the store ever makes).
  static Result<std::unique_ptr<ObjectStore>> Open(const StoreOptions& options);
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Reserves a writable object of `bytes` for `owner` (a name shown in stats and errors).
  // Waits up to `timeout` for room when the arena is full; then OutOfMemory naming who holds
  // the memory. A request larger than the arena fails at once.
  Result<MutableObject> Create(uint64_t bytes, std::string_view owner, Duration timeout);
  Result<MutableObject> Create(uint64_t bytes, std::string_view owner) {
    return Create(bytes, owner, options_.create_timeout);
  }

  // Starts copying src's bytes [offset, offset + bytes) to `dst` on `engine`. The returned
  // fence completes when the copy is done; until then the object stays allocated, whatever
  // happens to `src` and every other ref. `dst` must stay valid until the fence completes.
  Result<std::shared_ptr<const CopyFence>> CopyOut(const ObjectRef& src, uint64_t offset,
                                                   void* dst, uint64_t bytes,
                                                   CopyEngine& engine);
  // Starts copying `bytes` from `src` into dst's bytes at `offset`. dst must not be sealed
  // before the returned fence completes (MutableObject::Seal checks).
  Result<std::shared_ptr<const CopyFence>> CopyInto(MutableObject& dst, uint64_t offset,
                                                    const void* src, uint64_t bytes,
                                                    CopyEngine& engine);

  // Drops the in-flight reference of every copy whose fence has completed, freeing objects
  // that no one else holds. Returns how many fences completed. Never blocks on a copy.
  size_t PollFences() EXCLUDES(mu_);

  StoreStats Stats() const EXCLUDES(mu_);
  // Checks the allocator and the live-object table against each other. For tests; call it
  // when no other thread is releasing refs (a ref dropped concurrently looks like a leak).
  Status CheckConsistency() const EXCLUDES(mu_);

  const StoreOptions& options() const { return options_; }
  const PinnedArena& arena() const { return *arena_; }

 private:
  friend void store_internal::Reclaim(store_internal::ObjectEntry* entry);
  struct PendingCopy {
    store_internal::ObjectEntry* entry;
    std::shared_ptr<const CopyFence> fence;
  };
  struct Owner {
    std::string name;
    uint64_t objects = 0;
    uint64_t bytes = 0;
  };

  ObjectStore(const StoreOptions& options, std::unique_ptr<PinnedArena> arena);
  void Reclaim(store_internal::ObjectEntry* entry) EXCLUDES(mu_);
  void FreeLocked(store_internal::ObjectEntry* entry) REQUIRES(mu_);
  size_t PollFencesLocked() REQUIRES(mu_);
  uint32_t OwnerIndexLocked(std::string_view owner) REQUIRES(mu_);
  StoreStats StatsLocked() const REQUIRES(mu_);
  Status FullError(uint64_t bytes, std::string_view owner, Duration waited) const REQUIRES(mu_);
  Result<std::shared_ptr<const CopyFence>> Track(store_internal::ObjectEntry* entry,
                                                 Result<std::unique_ptr<CopyFence>> fence);
  void ReaperLoop() EXCLUDES(mu_);

  const StoreOptions options_;
  const uint64_t capacity_;  // options_.capacity_bytes rounded down to the alignment
  const std::unique_ptr<PinnedArena> arena_;

  mutable std::mutex mu_;
  std::condition_variable space_cv_;   // signalled when bytes are freed
  std::condition_variable reaper_cv_;  // signalled on the first pending copy and at shutdown
  std::unique_ptr<ArenaAllocator> allocator_ GUARDED_BY(mu_);
  std::deque<store_internal::ObjectEntry> entries_ GUARDED_BY(mu_);  // stable addresses
  std::vector<store_internal::ObjectEntry*> spare_entries_ GUARDED_BY(mu_);
  std::vector<store_internal::ObjectEntry*> live_ GUARDED_BY(mu_);
  std::vector<PendingCopy> pending_ GUARDED_BY(mu_);
  std::deque<Owner> owners_ GUARDED_BY(mu_);
  std::unordered_map<std::string_view, uint32_t> owner_index_ GUARDED_BY(mu_);
  uint64_t next_object_id_ GUARDED_BY(mu_) = 1;
  uint64_t used_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t high_water_ GUARDED_BY(mu_) = 0;
  uint64_t creates_ GUARDED_BY(mu_) = 0;
  uint64_t frees_ GUARDED_BY(mu_) = 0;
  uint64_t create_waits_ GUARDED_BY(mu_) = 0;
  uint64_t create_timeouts_ GUARDED_BY(mu_) = 0;
  uint64_t reaper_polls_ GUARDED_BY(mu_) = 0;
  int waiters_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

}  // namespace tandem
