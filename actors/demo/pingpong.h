// The pingpong demo: producers fill store objects with seeded bytes and a checksum and push
// their refs into a channel; consumers pop them (honouring min_ready), verify every byte
// against the checksum, and release them. It exercises the store (create/seal/backpressure
// and refcounts held by channels), channels, actors, restarts and the profile, and is the
// default job until the DFlash pipeline lands (examples/pingpong.toml).
//
// Settings: producer `out`, `objects` (per replica, default 1000), `object_bytes` (default
// 65536); consumer `in`. Tests inject a throwing consumer through ConsumerFaults
// (consumer_faults.h), not through the job file.
// Thread-safety: actors run on their own executors; DemoItem is moved between threads
// through a channel.
#pragma once

#include <cstdint>

#include "runtime/channel/channel.h"
#include "runtime/store/object_ref.h"

namespace tandem::demo {

struct DemoItem {
  ObjectRef ref;
  uint64_t index = 0;     // producer-local sequence number
  uint64_t checksum = 0;  // of the object's bytes, computed by the producer
};

// FNV-1a over 8-byte words (the tail byte-wise): a checksum any corruption would change.
uint64_t Checksum(const uint8_t* data, uint64_t bytes);
// Deterministic bytes for object `index` of producer `replica` under `seed`.
void FillObject(uint8_t* data, uint64_t bytes, uint64_t seed, uint64_t replica, uint64_t index);

}  // namespace tandem::demo

namespace tandem {
// A DemoItem in a channel counts as a channel-held reference of its object.
template <>
struct ChannelHolderHooks<demo::DemoItem> {
  static void OnEnter(demo::DemoItem& item) { item.ref.SetHolder(HolderKind::kChannel); }
  static void OnLeave(demo::DemoItem& item) { item.ref.SetHolder(HolderKind::kLocal); }
};
}  // namespace tandem
