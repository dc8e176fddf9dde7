#include "runtime/store/object_ref.h"

#include <fmt/format.h>

#include "runtime/store/object_store.h"

namespace tandem {

std::string ObjectId::ToString() const {
  return fmt::format("n{}.s{}.o{}", node_id, store_id, object_id);
}

std::string_view HolderKindName(HolderKind kind) {
  switch (kind) {
    case HolderKind::kLocal: return "local";
    case HolderKind::kChannel: return "channel";
    case HolderKind::kInFlight: break;
  }
  return "in flight";
}

MutableObject::~MutableObject() {
  if (entry_ != nullptr) {
    store_internal::ReleaseRef(std::exchange(entry_, nullptr), store_internal::RefPart::kLocal);
  }
}

ObjectRef MutableObject::Seal() {
  TANDEM_CHECK_MSG(entry_ != nullptr, "Seal of an empty MutableObject");
  for (const auto& fence : writes_) {
    TANDEM_CHECK_MSG(fence->IsComplete(),
                     "object {} sealed while a copy into it is still in flight; wait for "
                     "the fence CopyInto returned first",
                     entry_->id.ToString());
  }
  writes_.clear();
  entry_->sealed.store(true, std::memory_order_relaxed);
  return ObjectRef(std::exchange(entry_, nullptr), HolderKind::kLocal);
}

}  // namespace tandem
