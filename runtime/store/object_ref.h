// ObjectRef and MutableObject: the only ways to reach an object in the store.
//
// An object is created writable (MutableObject, one owner), filled, then sealed into a
// read-only ObjectRef. ObjectRef is an intrusive, atomically counted handle: copying it adds
// a reference, destroying it drops one; the object's bytes go back to the arena only when
// no reference of any kind remains and every copy fence on it has completed.
//
// Each ObjectRef knows which kind of holder it counts as (HolderKind); the store reports
// counts by kind so `tandem status` can show where memory is held. A channel calls
// SetHolder(HolderKind::kChannel) when a ref enters it and SetHolder(HolderKind::kLocal)
// when the ref leaves it; an object link to another node holds what it sent as kInFlight
// until the receiver acknowledges the copy (runtime/transfer).
//
// Thread-safety: distinct ObjectRef values may be used from different threads at once, even
// when they name the same object (like std::shared_ptr). One ObjectRef value must not be
// mutated from two threads at once. MutableObject is single-owner and not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/store/copy_engine.h"
#include "runtime/store/object_entry.h"

namespace tandem {

enum class HolderKind : uint8_t {
  kLocal,     // a variable in some actor or thread
  kChannel,   // sitting in a channel between actors
  kInFlight,  // an outgoing copy to another node, held until the receiver acknowledges it
              // (counted with the in-flight copies: the fence extends over the wire)
};
std::string_view HolderKindName(HolderKind kind);

class ObjectRef {
 public:
  ObjectRef() = default;
  // The copy counts as a new kLocal reference, whatever the holder kind of `other`.
  ObjectRef(const ObjectRef& other) : entry_(other.entry_) {
    if (entry_ != nullptr) entry_->AddRef(store_internal::RefPart::kLocal);
  }
  ObjectRef(ObjectRef&& other) noexcept
      : entry_(std::exchange(other.entry_, nullptr)), holder_(other.holder_) {}
  ObjectRef& operator=(ObjectRef other) noexcept {
    std::swap(entry_, other.entry_);
    std::swap(holder_, other.holder_);
    return *this;
  }
  ~ObjectRef() { Reset(); }

  // Drops this reference (if any); the ref becomes empty.
  void Reset() {
    if (entry_ == nullptr) return;
    store_internal::ReleaseRef(std::exchange(entry_, nullptr), Part(holder_));
  }

  // Moves this reference's count from its current holder kind to `kind`.
  // REQUIRES: non-empty.
  void SetHolder(HolderKind kind) {
    TANDEM_CHECK_MSG(entry_ != nullptr, "SetHolder on an empty ObjectRef");
    entry_->MoveRef(Part(holder_), Part(kind));
    holder_ = kind;
  }
  HolderKind holder() const { return holder_; }

  explicit operator bool() const { return entry_ != nullptr; }
  // REQUIRES for the accessors below: non-empty.
  const uint8_t* data() const { return entry_->data; }
  uint64_t size() const { return entry_->size; }
  const ObjectId& id() const { return entry_->id; }
  std::string_view owner() const { return *entry_->owner; }
  RefCounts counts() const { return entry_->Counts(); }

 private:
  friend class MutableObject;
  friend class ObjectStore;
  ObjectRef(store_internal::ObjectEntry* adopted, HolderKind kind)
      : entry_(adopted), holder_(kind) {}
  static store_internal::RefPart Part(HolderKind kind) {
    switch (kind) {
      case HolderKind::kLocal: return store_internal::RefPart::kLocal;
      case HolderKind::kChannel: return store_internal::RefPart::kChannel;
      case HolderKind::kInFlight: break;
    }
    return store_internal::RefPart::kInflight;
  }

  store_internal::ObjectEntry* entry_ = nullptr;
  HolderKind holder_ = HolderKind::kLocal;
};

// A newly created object, writable by its one owner until sealed. Destroying it unsealed
// discards the object.
class MutableObject {
 public:
  MutableObject() = default;
  MutableObject(MutableObject&& other) noexcept
      : entry_(std::exchange(other.entry_, nullptr)), writes_(std::move(other.writes_)) {}
  MutableObject& operator=(MutableObject other) noexcept {
    std::swap(entry_, other.entry_);
    std::swap(writes_, other.writes_);
    return *this;
  }
  MutableObject(const MutableObject&) = delete;
  ~MutableObject();

  explicit operator bool() const { return entry_ != nullptr; }
  // REQUIRES for the accessors below: non-empty.
  uint8_t* data() const { return entry_->data; }
  uint64_t size() const { return entry_->size; }
  const ObjectId& id() const { return entry_->id; }
  std::string_view owner() const { return *entry_->owner; }

  // Makes the object read-only and returns the first ObjectRef to it (kLocal); this
  // MutableObject becomes empty.
  // REQUIRES: non-empty, and every copy into it (ObjectStore::CopyInto) has completed:
  // sealing bytes a copy engine is still writing is a bug and aborts.
  ObjectRef Seal();

 private:
  friend class ObjectStore;
  explicit MutableObject(store_internal::ObjectEntry* adopted) : entry_(adopted) {}

  store_internal::ObjectEntry* entry_ = nullptr;
  std::vector<std::shared_ptr<const CopyFence>> writes_;  // copies into this object
};

}  // namespace tandem
