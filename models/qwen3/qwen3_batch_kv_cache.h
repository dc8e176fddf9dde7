// The key/value caches of a Qwen3 target decoding several sequences at once: one
// Qwen3KvCache per sequence (each with its own length, cropped on its own), plus packed i32
// staging rows for the ids and positions of one batched Extend (Qwen3Target::ExtendBatch).
// A sequence's cache also works alone with Qwen3Target::Extend (a prefill of one prompt
// while the others wait).
//
// Memory: sequences x Qwen3KvCache(capacity), plus 2 x i32 [sequences * capacity].
//
// Thread-safety: thread-compatible; one Extend at a time, on the target's stream.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/core/tensor.h"
#include "models/qwen3/qwen3_kv_cache.h"
#include "runtime/core/status.h"

namespace tandem::models {

// One sequence's share of a batched Extend: `tokens` (host ids) appended to sequence
// `sequence` of a Qwen3BatchKvCache.
struct BatchExtendPart {
  int64_t sequence = 0;
  std::span<const int32_t> tokens;
};

class Qwen3BatchKvCache {
 public:
  Qwen3BatchKvCache() = default;
  // `sequences` caches of `capacity` tokens each, in memory from `alloc` (on its device).
  // InvalidArgument for sequences < 1 or capacity < 1. REQUIRES: `alloc` outlives the cache.
  static Result<Qwen3BatchKvCache> Create(const TransformerConfig& c, int64_t sequences,
                                          int64_t capacity, kernels::Allocator& alloc,
                                          kernels::Stream stream = nullptr);

  int64_t sequences() const { return static_cast<int64_t>(caches_.size()); }
  // REQUIRES 0 <= i < sequences().
  Qwen3KvCache& sequence(int64_t i) { return caches_[static_cast<size_t>(i)]; }
  const Qwen3KvCache& sequence(int64_t i) const { return caches_[static_cast<size_t>(i)]; }
  int64_t nbytes() const;
  // i32 [sequences * capacity] staging rows for the packed ids and positions of an Extend.
  kernels::TensorView id_staging() const { return ids_.view(); }
  kernels::TensorView position_staging() const { return pos_.view(); }

 private:
  std::vector<Qwen3KvCache> caches_;
  kernels::Tensor ids_, pos_;
};

}  // namespace tandem::models
