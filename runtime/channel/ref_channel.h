// Channels of ObjectRefs: while a ref sits in a channel the store counts it as a channel
// holding (HolderKind::kChannel), so `tandem status` shows memory parked between actors
// apart from memory actors hold in hand.
//
// Covers Channel<ObjectRef> and any item type that exposes its refs with a ForEachRef
// member, e.g. a batch carrying one object per captured layer:
//
//   struct HiddenBatch {
//     std::vector<ObjectRef> layers;  // k objects of [T, H]
//     template <class F> void ForEachRef(F&& f) { for (ObjectRef& r : layers) f(r); }
//   };
//
// Include this header (not channel.h alone) in every file that uses such a channel: the
// hooks are template specialisations and must be visible wherever Channel<T> is used.
//
// Thread-safety: as Channel<T>; hooks run under the channel's lock and only touch the refs
// being moved in or out.
#pragma once

#include "runtime/channel/channel.h"
#include "runtime/store/object_ref.h"

namespace tandem {

template <>
struct ChannelHolderHooks<ObjectRef> {
  static void OnEnter(ObjectRef& ref) {
    if (ref) ref.SetHolder(HolderKind::kChannel);
  }
  static void OnLeave(ObjectRef& ref) {
    if (ref) ref.SetHolder(HolderKind::kLocal);
  }
};

template <class T>
concept HoldsObjectRefs = requires(T& item) { item.ForEachRef([](ObjectRef&) {}); };

template <HoldsObjectRefs T>
struct ChannelHolderHooks<T> {
  static void OnEnter(T& item) {
    item.ForEachRef([](ObjectRef& r) { ChannelHolderHooks<ObjectRef>::OnEnter(r); });
  }
  static void OnLeave(T& item) {
    item.ForEachRef([](ObjectRef& r) { ChannelHolderHooks<ObjectRef>::OnLeave(r); });
  }
};

}  // namespace tandem
