// The target side of speculative decoding, whatever the family: one sequence's decode cache
// behind Extend / Crop / Reset, plus the token embedding and LM head the drafter shares.
// DFlashDecoder drives only this interface. Two implementations:
//   * the dense loader's targets (models/qwen3): Qwen3 (`qwen3`), Llama-3 (`llama`) and
//     Qwen3-MoE (`qwen3_moe`: the same attention, mixture-of-experts feed-forward blocks);
//     Qwen3Target::Extend over a Qwen3KvCache; Crop forgets rows, to any length;
//   * the Qwen3.5 / Qwen3.6 hybrid (models/qwen3_5), dense or mixture-of-experts, wrapper or
//     text-only (`qwen3_5`, `qwen3_5_text`, `qwen3_5_moe`, `qwen3_5_moe_text`, e.g.
//     Qwen3.6-35B-A3B): Qwen35Target::Extend over a Qwen35Cache; Crop forgets attention rows
//     and replays the accepted prefix of the last block through the Gated DeltaNet layers
//     from the block-start snapshot (qwen3_5_cache.h), so it rolls back only inside the last
//     Extend of at most max_rollback() tokens.
// A MoE block routes every token by that token alone, so a verify block, a rollback replay
// and a one-token step route a token as a prefill does (the caches hold no MoE state).
// LoadDecodeTarget and ReadDecodeTargetShape pick the family from config.json's model_type;
// any other model_type is refused naming the file, the key and the supported values.
//
// Thread-safety: thread-compatible; an implementation drives its target's stream.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "runtime/core/status.h"

namespace tandem::models {

// What a drafter and a decode loop must agree with, read from config.json alone.
struct DecodeTargetShape {
  std::string model_type;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_hidden_layers = 0;
  std::vector<int64_t> eos_token_ids;
  int64_t max_position_embeddings = 0;  // 0: not given
  bool hybrid = false;                  // the Qwen3.5 / 3.6 family (models/qwen3_5)
  bool moe = false;                     // mixture-of-experts blocks (qwen3_moe, qwen3_5_moe*)
};

// The family of a config.json model_type: kDense for qwen3, qwen3_moe and llama; kHybrid for
// qwen3_5, qwen3_5_text, qwen3_5_moe and qwen3_5_moe_text; kUnsupported otherwise.
enum class DecodeFamily { kDense, kHybrid, kUnsupported };
DecodeFamily DecodeFamilyOf(const std::string& model_type);

class DecodeTarget {
 public:
  virtual ~DecodeTarget() = default;
  virtual const DecodeTargetShape& shape() const = 0;
  virtual kernels::Device device() const = 0;
  // Where the target's weights came from; a decoder's buffers that work with them too.
  virtual kernels::Allocator& allocator() const = 0;
  virtual int64_t max_tokens() const = 0;           // the most tokens one Extend takes
  virtual int64_t capacity() const = 0;             // the most tokens the cache holds
  virtual int64_t max_rollback() const = 0;         // the longest Extend that Crop can undo
  virtual kernels::TensorView embed() const = 0;    // bf16 [V, H]
  virtual kernels::TensorView lm_head() const = 0;  // bf16 [V, H]

  virtual int64_t length() const = 0;
  // Empties the cache for a new sequence.
  virtual Status Reset() = 0;
  // The family's Extend: appends host ids, writes captures (bf16 [B, H]) and logits (bf16 /
  // f32 [B, V], may be empty); asynchronous on CUDA.
  virtual Status Extend(std::span<const int32_t> tokens, std::span<const LayerCapture> captures,
                        kernels::TensorView logits) = 0;
  // Keeps the first `length` tokens (InvalidArgument where the family cannot roll back).
  virtual Status Crop(int64_t length) = 0;
};

// Adapters over a target the caller keeps alive; each owns its cache of `capacity` tokens,
// made on `stream` (the target's) from the allocator the target's weights came from.
Result<std::unique_ptr<DecodeTarget>> MakeDecodeTarget(Qwen3Target* target, int64_t capacity,
                                                       kernels::Stream stream);
Result<std::unique_ptr<DecodeTarget>> MakeDecodeTarget(Qwen35Target* target, int64_t capacity,
                                                       int64_t max_rollback,
                                                       kernels::Stream stream);

// config.json of `dir` (or the file itself) as a DecodeTargetShape, the family chosen by
// model_type; nothing else is read. Errors name the file and key.
Result<DecodeTargetShape> ReadDecodeTargetShape(const std::string& dir);

struct DecodeTargetOptions {
  int64_t max_tokens = 0;     // the longest Extend (prefill) the target's workspace takes
  int64_t capacity = 0;       // cache tokens
  int64_t max_rollback = 16;  // the longest verify block (hybrid: rollback data kept for it)
  kernels::Stream stream = nullptr;
};

// Loads the target of `dir` into memory from `alloc`, on its device (family by model_type),
// with its cache (from `alloc` too); the returned object owns both. REQUIRES: `alloc`
// outlives it.
Result<std::unique_ptr<DecodeTarget>> LoadDecodeTarget(const std::string& dir,
                                                       kernels::Allocator& alloc,
                                                       const DecodeTargetOptions& options);

}  // namespace tandem::models
