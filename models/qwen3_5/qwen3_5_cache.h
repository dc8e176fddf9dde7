// The decode cache of a Qwen3.5 / Qwen3.6 hybrid target for one sequence: what
// Qwen35Target::Extend needs to continue the sequence by a few tokens, and to roll back the
// rejected drafts of a speculative block.
//
// Per gated-attention layer: keys (after k_norm and RoPE) and values of every token, bf16
// [capacity, hk, d], as Qwen3KvCache. Rolling back is forgetting rows.
//
// Per Gated DeltaNet layer, a recurrent state cannot forget tokens, so the cache keeps what
// rebuilds the state after any accepted prefix of the LAST extension, when that extension had
// at most `max_block` tokens (a verify step):
//   * state[2]: f32 [hv, dk, dv], ping-pong. An Extend reads state[cur] and writes the state
//     after its tokens into state[1-cur], then flips cur, so state[1-cur] is the snapshot at
//     the block start (no copy).
//   * window[2]: bf16 [K-1 + max_block, C] raw (pre-conv) q|k|v rows, ping-pong likewise. The
//     conv state is rows [off, off+K-1) of window[wcur]. An Extend writes [conv state; block
//     rows] into the other window (CausalConv1dSiluStep's history), so the conv state after
//     any m accepted tokens is rows [m, m+K-1): rolling the conv back costs nothing.
//   * the block's conv outputs (q|k|v, bf16 [max_block, C]) and gates (g, beta, f32
//     [max_block, hv]), written there by the Extend itself.
// Crop to block start + m (0 <= m < block length) replays the m accepted tokens through the
// delta rule from the snapshot (GatedDeltaRuleStep without outputs, on the cache's stream);
// m = 0 just flips back to the snapshot. An extension longer than max_block (a prefill)
// keeps no rollback data (its window holds only the last K-1 rows): Crop below its end is
// refused.
//
// Cost (27B shape: 48 DeltaNet layers, hv 48, dk = dv 128, C 10240, 16 attention layers with
// 4 x 256 KV, max_block 16): states 2 x 3.1 MB per layer = 302 MB; windows, block outputs
// and gates 1.1 MB per layer = 53 MB; KV 64 KB per token (268 MB at 4096 tokens). Keeping a
// state per block position instead would cost 16 x 151 MB = 2.4 GB. Time: a verify writes
// one state per layer (as any step does); a partial accept adds a replay of m <= 15 tokens
// per layer that reads the snapshot once and writes the state once (~0.3 GB of traffic per
// verify at this shape, about 0.1 ms on an H200, not measured) and a full accept or a full
// rejection adds nothing.
//
// Thread-safety: thread-compatible; one Extend, Crop or Reset at a time, on the stream the
// cache was created with (the target's).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "models/qwen3_5/qwen3_5_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

// One Gated DeltaNet layer's cache views for an Extend of t tokens.
struct Qwen35LinearDecode {
  kernels::TensorView conv_state;  // bf16 [K-1, C]: raw rows of the K-1 tokens before
  kernels::TensorView history;     // bf16 [R, C]: receives the last R rows of [conv_state; x]
  kernels::TensorView mixed;       // bf16 [t, C] conv output, or empty (then the workspace)
  kernels::TensorView g, beta;     // f32 [t, hv] gates, or empty (then the workspace)
  kernels::TensorView state_in;    // f32 [hv, dk, dv]
  kernels::TensorView state_out;   // f32 [hv, dk, dv]
};

class Qwen35Cache {
 public:
  Qwen35Cache() = default;
  // Room for `capacity` tokens of a model with config `c` in memory from `alloc`, on its
  // device (allocated for work on `stream`, zero state). Blocks of up to `max_block` tokens
  // can be rolled back. InvalidArgument for capacity < 1 or max_block < 1.
  // REQUIRES: `alloc` outlives the cache.
  static Result<Qwen35Cache> Create(const Qwen35Config& c, int64_t capacity, int64_t max_block,
                                    kernels::Allocator& alloc, kernels::Stream stream = nullptr);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t max_block() const { return max_block_; }
  kernels::Device device() const { return storage_.device(); }
  int64_t nbytes() const { return storage_.nbytes(); }
  // The smallest length Crop accepts now: the start of the last extension when it kept its
  // rollback data (at most max_block tokens), else length().
  int64_t rollback_floor() const { return length_ - block_len_; }

  // Keeps the first `length` tokens. InvalidArgument unless rollback_floor() <= length <=
  // length(), naming both. Enqueues the DeltaNet replay on the cache's stream.
  Status Crop(int64_t length);
  // Empties the cache (length 0, zero DeltaNet and conv state) for a new sequence.
  Status Reset();

  // InvalidArgument unless the cache was made for a model of this shape (layers, layer types,
  // heads and dims), naming both.
  Status CheckFits(const Qwen35Config& c) const;

  // For Qwen35Target::Extend. REQUIRES: layer `layer` is of the right type; t >= 1.
  kernels::TensorView keys(int layer) const;    // bf16 [capacity, hk, d]
  kernels::TensorView values(int layer) const;  // bf16 [capacity, hk, d]
  Qwen35LinearDecode Linear(int layer, int64_t t) const;
  kernels::TensorView id_staging() const { return ids_; }        // i32 [capacity]
  kernels::TensorView position_staging() const { return pos_; }  // i32 [capacity]
  // Called by Extend before it writes anything: the last block's rollback data (and the
  // snapshot) are about to be overwritten, so a failed Extend leaves a cache that keeps its
  // length and state but can no longer roll back.
  void BeginExtend() { block_len_ = 0; }
  // Called by Extend once every layer has written its rows for t new tokens.
  void Commit(int64_t t);

 private:
  struct LinearSlot {
    kernels::TensorView state[2];   // f32 [hv, dk, dv]
    kernels::TensorView window[2];  // bf16 [K-1 + max_block, C]
    kernels::TensorView mixed;      // bf16 [max_block, C]
    kernels::TensorView g, beta;    // f32 [max_block, hv]
  };
  struct AttentionSlot {
    kernels::TensorView k, v;  // bf16 [capacity, hk, d]
  };

  Qwen35Config config_;  // the shape it was made for
  kernels::Stream stream_ = nullptr;
  kernels::Tensor storage_;  // u8: every buffer below
  std::vector<int> slot_;    // per layer: index into linear_ or attention_
  std::vector<LinearSlot> linear_;
  std::vector<AttentionSlot> attention_;
  kernels::TensorView ids_, pos_;
  int64_t capacity_ = 0, max_block_ = 0, length_ = 0;
  int64_t block_len_ = 0;    // tokens of the last extension that can still be rolled back
  int64_t conv_offset_ = 0;  // the conv state is window[wcur_] rows [offset, offset + K-1)
  int cur_ = 0, wcur_ = 0;   // state[cur_] is the state after length_ tokens
};

}  // namespace tandem::models
