// Wire items: how a channel's item crosses to another node.
//
// An item type T opts in by specialising WireCodec<T>:
//
//   template <> struct WireCodec<MyBatch> {
//     static void Encode(const MyBatch& b, WireWriter& w) { w.Vector(b.ids); w.Object(b.ref); }
//     static Result<MyBatch> Decode(WireReader& r) {
//       MyBatch b;
//       RETURN_IF_ERROR(r.Vector(&b.ids));
//       ASSIGN_OR_RETURN(b.ref, r.Object());
//       return b;
//     }
//   };
//
// Encode writes the item's metadata (plain bytes) and names its store objects; the objects'
// bytes are not copied into the metadata: the link sends them straight from the store's
// pinned arena after it, in the order Encode named them. Decode reads the metadata back in
// the same order; each Object() creates an object of the recorded size in the receiving
// node's store and fills it from the link, then seals it. A codec is registered per channel
// for a job (wire_port.h), so no process-global table decides what crosses.
//
// Decoding is defensive: every read is bounded by the metadata actually received, and
// vectors by what is left of it, so a corrupt frame is a DataLoss error, never an overrun.
//
// Thread-safety: WireWriter and WireReader are single-threaded values.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/core/status.h"
#include "runtime/store/object_ref.h"
#include "runtime/store/object_store.h"

namespace tandem::transfer {

// One object's bytes to send after the metadata: a view into the store (kept alive by the
// item's hold until the receiver acknowledges it).
struct WireSpan {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

class WireWriter {
 public:
  void Bytes(const void* data, size_t n) {
    meta_.append(static_cast<const char*>(data), n);
  }
  template <class V>
    requires std::is_trivially_copyable_v<V>
  void Pod(const V& v) {
    Bytes(&v, sizeof(V));
  }
  template <class V>
    requires std::is_trivially_copyable_v<V>
  void Vector(const std::vector<V>& v) {
    Pod<uint64_t>(v.size());
    if (!v.empty()) Bytes(v.data(), v.size() * sizeof(V));
  }
  // The object's size goes into the metadata, its bytes after it. REQUIRES: `ref` stays alive
  // until the frame is sent (the link holds the item).
  void Object(const ObjectRef& ref) {
    Pod<uint64_t>(ref.size());
    objects_.push_back({ref.data(), ref.size()});
  }

  const std::string& meta() const { return meta_; }
  const std::vector<WireSpan>& objects() const { return objects_; }
  uint64_t object_bytes() const {
    uint64_t n = 0;
    for (const WireSpan& s : objects_) n += s.size;
    return n;
  }
  std::string TakeMeta() { return std::move(meta_); }
  std::vector<WireSpan> TakeObjects() { return std::move(objects_); }

 private:
  std::string meta_;
  std::vector<WireSpan> objects_;
};

class WireReader {
 public:
  // Fills `n` bytes at `dst` with the next object payload bytes from the link.
  using PayloadFn = std::function<Status(uint8_t* dst, uint64_t n)>;

  // `meta`: the frame's metadata; `payload_bytes`: the total the frame announced for objects;
  // objects are created in `store` for `owner`.
  WireReader(std::string_view meta, uint64_t payload_bytes, ObjectStore* store, std::string owner,
             PayloadFn payload)
      : meta_(meta),
        payload_left_(payload_bytes),
        store_(store),
        owner_(std::move(owner)),
        payload_(std::move(payload)) {}

  Status Bytes(void* dst, size_t n) {
    if (n > meta_.size() - pos_)
      return DataLossError("wire item: metadata ends after {} bytes, {} more wanted", meta_.size(),
                           n - (meta_.size() - pos_));
    if (n > 0) std::memcpy(dst, meta_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  template <class V>
    requires std::is_trivially_copyable_v<V>
  Status Pod(V* v) {
    return Bytes(v, sizeof(V));
  }
  template <class V>
    requires std::is_trivially_copyable_v<V>
  Status Vector(std::vector<V>* v) {
    uint64_t n = 0;
    RETURN_IF_ERROR(Pod(&n));
    if (n > (meta_.size() - pos_) / sizeof(V))
      return DataLossError("wire item: a vector of {} elements of {} bytes in {} bytes left", n,
                           sizeof(V), meta_.size() - pos_);
    v->resize(n);
    return n == 0 ? Status::Ok() : Bytes(v->data(), n * sizeof(V));
  }
  // The next object: created in the store (waiting for room as ObjectStore::Create does),
  // filled from the link, sealed.
  Result<ObjectRef> Object();

  // DataLoss unless the metadata and the payload were consumed exactly.
  Status Finish() const;
  // Reads and drops what is left of the payload (a frame whose item is refused).
  Status Skip();

 private:
  std::string_view meta_;
  size_t pos_ = 0;
  uint64_t payload_left_;
  ObjectStore* store_;
  std::string owner_;
  PayloadFn payload_;
};

// Specialise for each item type that crosses nodes (see the header comment).
template <class T>
struct WireCodec;

template <class T>
concept WireItem = requires(const T& item, WireWriter& w, WireReader& r) {
  WireCodec<T>::Encode(item, w);
  { WireCodec<T>::Decode(r) } -> std::same_as<Result<T>>;
};

// A bare object.
template <>
struct WireCodec<ObjectRef> {
  static void Encode(const ObjectRef& ref, WireWriter& w) { w.Object(ref); }
  static Result<ObjectRef> Decode(WireReader& r) { return r.Object(); }
};

}  // namespace tandem::transfer
