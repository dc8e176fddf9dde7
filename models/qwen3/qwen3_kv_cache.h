// The key/value cache of a Qwen3 target for decoding one sequence: per layer, the keys
// (after k_norm and RoPE) and values of every token seen so far, bf16 [capacity, hk, d].
// Qwen3Target::Extend appends tokens (prefill, or a speculative block to verify); Crop
// forgets the newest ones (the rejected drafts). Positions are implicit: token i of the
// sequence sits at position i.
//
// Memory: 2 * layers * capacity * kv_dim bf16, plus two i32 [capacity] staging rows (token
// ids and positions of the tokens being appended) and a prefill's cu_seqlens, on the target's
// device.
//
// Thread-safety: thread-compatible; one Extend or Crop at a time, on the target's stream.
#pragma once

#include <cstdint>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "models/io/hf_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

class Qwen3KvCache {
 public:
  Qwen3KvCache() = default;
  // Room for `capacity` tokens of a model with config `c` in memory from `alloc`, on its
  // device (allocated for work on `stream`). InvalidArgument for capacity < 1.
  // REQUIRES: `alloc` outlives the cache.
  static Result<Qwen3KvCache> Create(const TransformerConfig& c, int64_t capacity,
                                     kernels::Allocator& alloc, kernels::Stream stream = nullptr);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int num_layers() const { return layers_; }
  kernels::Device device() const { return storage_.device(); }
  int64_t nbytes() const { return storage_.nbytes(); }

  // Keeps the first `length` tokens. InvalidArgument unless 0 <= length <= length().
  // Costs nothing: later appends overwrite the dropped rows.
  Status Crop(int64_t length);

  // bf16 [capacity, hk, d] views of layer `layer`'s keys and values (rows >= length() are
  // stale). REQUIRES 0 <= layer < num_layers().
  kernels::TensorView keys(int layer) const;
  kernels::TensorView values(int layer) const;
  // i32 [capacity] staging rows for the ids and positions of appended tokens.
  kernels::TensorView id_staging() const { return ids_; }
  kernels::TensorView position_staging() const { return pos_; }
  // i32 [2] staging for the cu_seqlens {0, n} of a prefill into the empty cache.
  kernels::TensorView cu_seqlens_staging() const { return cu_; }

  // Called by Qwen3Target::Extend once the appended rows are written.
  void Grow(int64_t tokens) { length_ += tokens; }

 private:
  kernels::Tensor storage_;  // u8: K and V of every layer, then the staging rows
  kernels::TensorView kv_;   // bf16 [layers, 2, capacity, hk, d]
  kernels::TensorView ids_, pos_, cu_;
  int64_t capacity_ = 0, length_ = 0;
  int layers_ = 0;
};

}  // namespace tandem::models
