// How a HiddenBatch crosses to another node (runtime/transfer/wire.h): its metadata (token
// ids, positions, boundaries, loss mask, checksum, layer ids, data position) as plain bytes,
// and its k layer objects sent straight from the store. The receiving drafter checks the
// checksum as for a local batch, so a batch damaged on the way is refused, not trained on.
//
// The dflash.target class registers its `out` channel with this codec in every job's
// registry (a job-prepare hook), so a job whose targets and drafters run on different nodes
// has what its object links need.
//
// Thread-safety: stateless.
#pragma once

#include "actors/dflash/hidden_batch.h"
#include "runtime/transfer/wire.h"

namespace tandem::transfer {

template <>
struct WireCodec<dflash::HiddenBatch> {
  // At most this many layers per batch (a corrupt count is refused before any allocation).
  static constexpr uint64_t kMaxLayers = 1024;

  static void Encode(const dflash::HiddenBatch& b, WireWriter& w) {
    const data::TokenBatch& t = b.tokens;
    w.Vector(t.input_ids);
    w.Vector(t.position_ids);
    w.Vector(t.cu_seqlens);
    w.Vector(t.loss_mask);
    w.Pod(t.max_seqlen);
    w.Pod(t.index);
    w.Pod(t.epoch);
    w.Pod(b.checksum);
    w.Pod(b.source_replica);
    w.Pod(b.hidden_size);
    w.Vector(b.layer_ids);
    w.Pod(b.next_position.epoch);
    w.Pod(b.next_position.next_batch);
    w.Pod<uint64_t>(b.layers.size());
    for (const ObjectRef& r : b.layers) w.Object(r);
  }

  static Result<dflash::HiddenBatch> Decode(WireReader& r) {
    dflash::HiddenBatch b;
    data::TokenBatch& t = b.tokens;
    RETURN_IF_ERROR(r.Vector(&t.input_ids));
    RETURN_IF_ERROR(r.Vector(&t.position_ids));
    RETURN_IF_ERROR(r.Vector(&t.cu_seqlens));
    RETURN_IF_ERROR(r.Vector(&t.loss_mask));
    RETURN_IF_ERROR(r.Pod(&t.max_seqlen));
    RETURN_IF_ERROR(r.Pod(&t.index));
    RETURN_IF_ERROR(r.Pod(&t.epoch));
    RETURN_IF_ERROR(r.Pod(&b.checksum));
    RETURN_IF_ERROR(r.Pod(&b.source_replica));
    RETURN_IF_ERROR(r.Pod(&b.hidden_size));
    RETURN_IF_ERROR(r.Vector(&b.layer_ids));
    RETURN_IF_ERROR(r.Pod(&b.next_position.epoch));
    RETURN_IF_ERROR(r.Pod(&b.next_position.next_batch));
    uint64_t k = 0;
    RETURN_IF_ERROR(r.Pod(&k));
    if (k > kMaxLayers)
      return DataLossError("hidden batch {}: {} layers on the wire (at most {})", t.index, k,
                           kMaxLayers);
    b.layers.reserve(k);
    for (uint64_t i = 0; i < k; ++i) {
      ASSIGN_OR_RETURN(ObjectRef ref, r.Object());
      b.layers.push_back(std::move(ref));
    }
    return b;
  }
};

}  // namespace tandem::transfer
