// Wire items: see wire.h.
#include "runtime/transfer/wire.h"

#include <algorithm>

namespace tandem::transfer {

Result<ObjectRef> WireReader::Object() {
  uint64_t size = 0;
  RETURN_IF_ERROR(Pod(&size));
  if (size > payload_left_)
    return DataLossError("wire item: an object of {} bytes with {} payload bytes left", size,
                         payload_left_);
  ASSIGN_OR_RETURN(MutableObject obj, store_->Create(size, owner_));
  RETURN_IF_ERROR(payload_(obj.data(), size));
  payload_left_ -= size;
  return obj.Seal();
}

Status WireReader::Finish() const {
  if (pos_ != meta_.size() || payload_left_ != 0)
    return DataLossError("wire item: {} metadata and {} payload bytes left over after decoding",
                         meta_.size() - pos_, payload_left_);
  return Status::Ok();
}

Status WireReader::Skip() {
  uint8_t scratch[1 << 16];
  while (payload_left_ > 0) {
    const uint64_t n = std::min<uint64_t>(payload_left_, sizeof(scratch));
    RETURN_IF_ERROR(payload_(scratch, n));
    payload_left_ -= n;
  }
  pos_ = meta_.size();
  return Status::Ok();
}

}  // namespace tandem::transfer
