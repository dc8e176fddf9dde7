// The FP8 form of a Qwen3 target's projections (precision = "fp8"): q/k/v/o, gate|up and
// down of every layer as e4m3 with one fp32 scale per 128x128 block (kernels/gemm/fp8.h),
// in one allocation on the weights' device, from the allocator they came from. A Qwen3-MoE
// layer (config.IsMoeLayer) has its routed experts' gate|up and down instead
// (kernels/moe/experts_fp8.h) and no dense gate|up or down. Embeddings, norms, the routers
// and the LM head stay bf16.
//
// Made layer by layer as a load stages each layer (Allocate + QuantizeLayer; a MoE layer's
// experts with its attention projections), or by quantizing whole bf16 weights on their
// device (Quantize), after which the caller may drop the bf16 copies
// (Qwen3Weights::ReleaseProjections); either way the projections' memory halves: Qwen3-8B's 12.9 GiB of bf16 projections become 6.5 GiB of e4m3 (+ 1/4096 for scales).
//
// Thread-safety: immutable after Quantize; views may be read from any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/gemm/fp8.h"
#include "kernels/moe/experts_fp8.h"
#include "models/io/target_precision.h"
#include "models/qwen3/qwen3_weights.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct Qwen3Fp8Layer {
  kernels::Fp8BlockWeight q_proj, k_proj, v_proj, o_proj, gate_up, down_proj;
  kernels::MoeFp8ExpertWeights experts;  // MoE layers only (gate_up, down_proj then empty)
};

class Qwen3Fp8Projections {
 public:
  // Quantizes every layer's projections of `weights` (which must still hold them) on the
  // weights' device, ordered on `stream`; returns once done. All of K, N must be multiples
  // of 16 on CUDA (every Qwen3 size is).
  static Result<Qwen3Fp8Projections> Quantize(const Qwen3Weights& weights, kernels::Stream stream);
  // Storage for every layer's e4m3 projections of `config` in memory from `alloc` (which
  // must outlive it), not yet filled;
  // QuantizeLayer fills layer by layer (e.g. as a Qwen3Weights ProjectionSink, so the bf16
  // projections never coexist in full with their FP8 form: the load's peak drops from
  // bf16 + e4m3 to e4m3 + one bf16 layer).
  static Result<Qwen3Fp8Projections> Allocate(const TransformerConfig& config,
                                              kernels::Allocator& alloc, kernels::Stream stream);
  // Quantizes `staged`'s projections into layer `layer` (enqueued on `stream`; `staged` must
  // stay valid until the stream reaches this point).
  Status QuantizeLayer(int64_t layer, const Qwen3LayerWeights& staged, kernels::Stream stream);

  Qwen3Fp8Projections() = default;
  Qwen3Fp8Projections(Qwen3Fp8Projections&&) = default;
  Qwen3Fp8Projections& operator=(Qwen3Fp8Projections&&) = default;

  const std::vector<Qwen3Fp8Layer>& layers() const { return layers_; }
  // The same e4m3 weights, owning nothing (nbytes() 0). REQUIRES: this outlives the alias.
  Qwen3Fp8Projections Alias() const {
    Qwen3Fp8Projections p;
    p.layers_ = layers_;
    return p;
  }
  int64_t nbytes() const { return storage_.nbytes(); }

 private:
  kernels::Tensor storage_;  // u8: every code and scale
  std::vector<Qwen3Fp8Layer> layers_;
};

}  // namespace tandem::models
