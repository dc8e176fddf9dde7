// HiddenBatch: what a TargetActor hands a DrafterActor through the "hidden" channel: the
// packed batch's metadata (token ids, per-document positions, boundaries, loss mask, and a
// checksum of them computed by the target) plus one sealed store object per captured target
// layer, each bf16 [T, H] (split-FC layout: the drafter concatenates them on its device).
//
// Thread-safety: a value, moved between actors through a channel. While it sits in a
// channel its refs count as channel holdings (ForEachRef, runtime/channel/ref_channel.h).
#pragma once

#include <cstdint>
#include <vector>

#include "data/corpus/token_batch.h"
#include "runtime/channel/ref_channel.h"
#include "runtime/store/object_ref.h"

namespace tandem::dflash {

struct HiddenBatch {
  data::TokenBatch tokens;           // metadata; tokens.index is the source's batch number
  uint64_t checksum = 0;             // tokens.Checksum() as the target computed it
  int32_t source_replica = 0;        // which target replica (data shard) produced it
  // Its producer's index on the channel (JobSpec::PortIndex "out": the writer groups' replicas
  // in file order), unique among the channel's writers: the key of the drafter's saved data
  // positions, so two target groups feeding one channel keep positions of their own.
  int32_t writer = 0;
  int64_t hidden_size = 0;           // H
  std::vector<int64_t> layer_ids;    // [k] DFlash layer ids, in the order of `layers`
  std::vector<ObjectRef> layers;     // [k] objects of bf16 [T, H]
  data::DataPosition next_position;  // the source's position after this batch (resume)

  template <class F>
  void ForEachRef(F&& f) {
    for (ObjectRef& r : layers) f(r);
  }
};

}  // namespace tandem::dflash
