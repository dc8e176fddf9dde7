// Qwen3Head: only the token embedding and the LM head of a Qwen3 (or Llama-3) causal LM,
// for a DFlash drafter that trains against the frozen target on a GPU of its own: it needs
// these two matrices, not the layers (for an 8B target: 2.5 GB instead of 16 GB).
// Loading reads just those tensors (converted to bf16, shapes checked against the config);
// Random makes the same values as Qwen3Weights::Random for the same config and seed.
// A tied model has one matrix, returned as both.
//
// Thread-safety: immutable after Load/Random; views may be read from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "models/io/hf_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

class Qwen3Head {
 public:
  // From the HF checkpoint directory `dir` (its config.json gives `config`), into memory
  // from `alloc` (copies ordered on `stream`; returns after they completed). Errors name the
  // file and the tensor (missing, wrong shape, not a float dtype).
  // REQUIRES (both): `alloc` outlives the head.
  static Result<Qwen3Head> Load(const std::string& dir, const TransformerConfig& config,
                                kernels::Allocator& alloc, kernels::Stream stream);
  // The embedding and LM head of Qwen3Weights::Random(config, alloc, seed, stream, scale).
  static Result<Qwen3Head> Random(const TransformerConfig& config, kernels::Allocator& alloc,
                                  uint64_t seed, kernels::Stream stream, float scale = 1.f);

  Qwen3Head() = default;
  Qwen3Head(Qwen3Head&&) = default;
  Qwen3Head& operator=(Qwen3Head&&) = default;

  kernels::TensorView embed() const { return embed_; }      // bf16 [V, H]
  kernels::TensorView lm_head() const { return lm_head_; }  // bf16 [V, H]; == embed if tied
  int64_t nbytes() const { return storage_.nbytes(); }

 private:
  static Result<Qwen3Head> Allocate(const TransformerConfig& config, kernels::Allocator& alloc,
                                    kernels::Stream stream);

  kernels::Tensor storage_;  // bf16 [1 or 2, V, H]
  kernels::TensorView embed_, lm_head_;
};

}  // namespace tandem::models
