// The FP8 form of a Qwen3.5 / 3.6 hybrid target's projections (precision = "fp8"): every
// layer's matrices as e4m3 with one fp32 scale per 128x128 block (kernels/gemm/fp8.h), in one
// allocation from the allocator the bf16 weights came from:
//   Gated DeltaNet layers: in_proj (qkv | z | b | a, one matrix) and out_proj;
//   gated attention layers: q_proj (query | gate), k_proj, v_proj, o_proj;
//   every layer: gate|up and down (a MoE layer's: its shared expert's, and its routed
//   experts as one MoeFp8ExpertWeights; the router and the shared expert's gate stay bf16).
// Embeddings, norms, the conv, the gates' A_log / dt_bias and the LM head stay bf16.
//
// Made by quantizing the bf16 weights on their device, all at once (Quantize, after which the
// caller may free the bf16 matrices: Qwen35Weights::ReleaseProjections) or layer by layer as
// they load (Allocate + QuantizeLayer as a Qwen35ProjectionSink): the 27B's 45.6 GiB of bf16
// projections become 22.8 GiB of e4m3 (+ 1/4096 for scales). An official FP8 checkpoint is
// dequantized to bf16 as it is read (Qwen35Weights::Load), then quantized here again with
// the same 128x128 blocks.
//
// Thread-safety: immutable after Quantize; views may be read from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/gemm/fp8.h"
#include "kernels/moe/experts_fp8.h"
#include "models/qwen3_5/qwen3_5_weights.h"
#include "runtime/core/status.h"

namespace tandem::models {

// One layer's e4m3 projections; the token mixer's fields that its type does not have are
// empty (data and scale views null).
struct Qwen35Fp8Layer {
  kernels::Fp8BlockWeight in_proj, out_proj;                 // linear_attention
  kernels::Fp8BlockWeight q_proj, k_proj, v_proj, o_proj;    // full_attention
  kernels::Fp8BlockWeight gate_up, down_proj;  // MoE: the shared expert (empty without one)
  kernels::MoeFp8ExpertWeights experts;        // MoE layers only
};

class Qwen35Fp8Projections {
 public:
  // Quantizes every layer's projections of `weights` (which must still hold them) on the
  // weights' device, ordered on `stream`; returns once done. On CUDA every matrix's K and N
  // must be multiples of 16 (every Qwen3.5 / 3.6 size is); errors name the layer.
  static Result<Qwen35Fp8Projections> Quantize(const Qwen35Weights& weights,
                                               kernels::Stream stream);
  // Storage for every layer's e4m3 projections of `config` from `alloc` (which must outlive
  // it), not yet filled; QuantizeLayer fills it layer by layer (e.g. as the
  // Qwen35ProjectionSink of Qwen35Weights::Load / Random, so the bf16 projections never sit
  // on the device all at once). The CUDA multiple-of-16 check happens here.
  static Result<Qwen35Fp8Projections> Allocate(const Qwen35Config& config,
                                               kernels::Allocator& alloc, kernels::Stream stream);
  // Quantizes `staged`'s projections into layer `layer` (enqueued on `stream`; `staged` must
  // stay valid until the stream reaches this point).
  Status QuantizeLayer(int64_t layer, const Qwen35LayerWeights& staged, kernels::Stream stream);

  Qwen35Fp8Projections() = default;
  Qwen35Fp8Projections(Qwen35Fp8Projections&&) = default;
  Qwen35Fp8Projections& operator=(Qwen35Fp8Projections&&) = default;

  const std::vector<Qwen35Fp8Layer>& layers() const { return layers_; }
  // The same e4m3 weights, owning nothing (nbytes() 0). REQUIRES: this outlives the alias.
  Qwen35Fp8Projections Alias() const {
    Qwen35Fp8Projections p;
    p.layers_ = layers_;
    return p;
  }
  int64_t nbytes() const { return storage_.nbytes(); }
  // What Quantize allocates for `config`.
  static int64_t Bytes(const Qwen35Config& config);

 private:
  kernels::Tensor storage_;  // u8: every code and scale
  std::vector<Qwen35Fp8Layer> layers_;
};

}  // namespace tandem::models
