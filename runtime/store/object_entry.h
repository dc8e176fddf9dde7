// Internal: the control block behind ObjectRef and MutableObject. Not part of the public
// API; include object_ref.h instead.
//
// The reference count is one 64-bit atomic word split into three 21-bit parts (local refs,
// refs held by channels, in-flight copies), so moving a reference between parts is a single
// atomic add that never passes through zero, and "the last reference of any kind is gone"
// is one compare of the whole word.
//
// Thread-safety: the count is atomic; the other fields are written by the store before the
// entry is published and are read-only while any reference exists.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/core/status.h"
#include "runtime/store/allocator.h"

namespace tandem {

class ObjectStore;

// Where an object lives: the node, the store on that node, and the object's number there.
// Unique for the lifetime of a store; object 0 is never handed out.
struct ObjectId {
  uint32_t node_id = 0;
  uint32_t store_id = 0;
  uint64_t object_id = 0;
  bool operator==(const ObjectId&) const = default;
  std::string ToString() const;  // "n0.s1.o42"
};

// A snapshot of one object's reference count, by part.
struct RefCounts {
  uint32_t local = 0;
  uint32_t channel = 0;
  uint32_t inflight_copies = 0;
  uint32_t total() const { return local + channel + inflight_copies; }
};

namespace store_internal {

enum class RefPart : int { kLocal = 0, kChannel = 1, kInflight = 2 };

constexpr int kPartBits = 21;
constexpr uint64_t kPartMax = (uint64_t{1} << kPartBits) - 1;
constexpr uint64_t Unit(RefPart p) { return uint64_t{1} << (kPartBits * static_cast<int>(p)); }
constexpr uint32_t Part(uint64_t word, RefPart p) {
  return static_cast<uint32_t>((word >> (kPartBits * static_cast<int>(p))) & kPartMax);
}

struct ObjectEntry {
  std::atomic<uint64_t> counts{0};
  std::atomic<bool> sealed{false};
  ObjectStore* store = nullptr;
  uint8_t* data = nullptr;
  uint64_t size = 0;  // bytes asked for; alloc.size may be larger (alignment)
  Allocation alloc;
  ObjectId id;
  const std::string* owner = nullptr;  // interned in the store; outlives the entry
  uint32_t owner_index = 0;
  uint32_t live_index = 0;  // position in the store's live table

  void AddRef(RefPart p) {
    uint64_t old = counts.fetch_add(Unit(p), std::memory_order_relaxed);
    TANDEM_CHECK_MSG(Part(old, p) < kPartMax, "object {}: reference count overflow",
                     id.ToString());
  }
  // Returns true when this dropped the last reference of any part.
  [[nodiscard]] bool DropRef(RefPart p) {
    uint64_t old = counts.fetch_sub(Unit(p), std::memory_order_acq_rel);
    TANDEM_CHECK_MSG(Part(old, p) > 0, "object {}: reference released twice", id.ToString());
    return old == Unit(p);
  }
  void MoveRef(RefPart from, RefPart to) {
    if (from == to) return;
    uint64_t old = counts.fetch_add(Unit(to) - Unit(from), std::memory_order_relaxed);
    TANDEM_CHECK_MSG(Part(old, from) > 0 && Part(old, to) < kPartMax,
                     "object {}: bad reference move", id.ToString());
  }
  RefCounts Counts() const {
    uint64_t w = counts.load(std::memory_order_acquire);
    return RefCounts{Part(w, RefPart::kLocal), Part(w, RefPart::kChannel),
                     Part(w, RefPart::kInflight)};
  }
};

// Returns the entry's bytes to its store. Called once, by whoever dropped the last reference.
void Reclaim(ObjectEntry* entry);

inline void ReleaseRef(ObjectEntry* entry, RefPart p) {
  if (entry->DropRef(p)) Reclaim(entry);
}

}  // namespace store_internal
}  // namespace tandem
