// The frozen weights of a Qwen3 (or Llama-3) causal LM, in one device allocation.
//
// Every parameter is a bf16 view carved from a single buffer (CUDA device memory from the
// caching pool, or host memory), laid out once from the config. The experts of a qwen3_moe
// layer are two [E, ...] matrices whichever layout the checkpoint stores them in
// (models/io/weight_spec.h: per expert, or transformers 5's fused tensors). `gate_proj` and `up_proj`
// are packed at load into one [2I, H] matrix (gate rows first), so the MLP's two input
// projections are one GEMM. Loading reads the checkpoint in one pass over its files, in
// offset order, converting fp32/fp16 tensors to bf16 on the way; shapes are checked against
// the config before anything is copied, and a missing or wrong-shaped tensor is an error
// naming the file and the tensor. Tied embeddings share the embedding matrix as LM head.
//
// Thread-safety: immutable after Load/Random; views may be read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "kernels/moe/moe_layer.h"
#include "models/io/hf_config.h"
#include "models/io/safetensors.h"
#include "models/io/weight_spec.h"
#include "runtime/core/status.h"

namespace tandem::models {

// One decoder layer. Linear weights use PyTorch's [out_features, in_features] layout.
struct Qwen3LayerWeights {
  kernels::TensorView input_norm;  // bf16 [H]
  kernels::TensorView q_proj;      // bf16 [hq*d, H]
  kernels::TensorView k_proj;      // bf16 [hk*d, H]
  kernels::TensorView v_proj;      // bf16 [hk*d, H]
  kernels::TensorView q_norm;      // bf16 [d]; empty without q/k norms (Llama)
  kernels::TensorView k_norm;      // bf16 [d]; empty without q/k norms
  kernels::TensorView o_proj;      // bf16 [H, hq*d]
  kernels::TensorView post_norm;   // bf16 [H]
  kernels::TensorView gate_up;     // bf16 [2I, H]: rows [0, I) gate_proj, [I, 2I) up_proj
  kernels::TensorView down_proj;   // bf16 [H, I]
  // A mixture-of-experts layer (config.IsMoeLayer) has these instead of gate_up/down_proj:
  // the router [E, H] and the experts [E, 2I, H] / [E, H, I] (I = moe_intermediate_size),
  // each one allocation whatever the checkpoint's expert layout.
  kernels::MoeLayerWeights moe;
};

// Receives one layer's bf16 projections (q/k/v/o, and gate|up and down, or a MoE layer's
// routed experts in moe.experts) as soon as all of them are on the device, e.g. to quantize
// them (models/qwen3/qwen3_fp8.h). `staged` views are valid
// during the call only: their memory goes back to the stream-ordered pool afterwards, so the
// sink may enqueue work that reads them on `stream` but must not keep them.
using ProjectionSink =
    std::function<Status(int64_t layer, const Qwen3LayerWeights& staged, kernels::Stream stream)>;

class Qwen3Weights {
 public:
  // Loads every weight `config` needs from `reader` into memory from `alloc`, on its device
  // (copies ordered on `stream`; returns after they have completed). Extra tensors are
  // ignored. An FP8
  // checkpoint (config.fp8_block_weights) has its F8_E4M3 weights dequantized to bf16 with
  // their 128x128 `*_scale_inv` (models/io/fp8_checkpoint.h); scales that do not match
  // their weight are DataLoss naming the tensor.
  // Errors: NotFound / DataLoss naming the file and tensor (missing, wrong shape, not a
  // float dtype), OutOfMemory.
  // With a `sink`, the projections are not kept: each layer's are read into a staging buffer
  // of one layer (from `alloc`), handed to the sink once complete, and the buffer freed, so
  // the device never holds more than the other weights plus the layers whose tensors are in
  // flight: one, as each file is read a layer at a time (LayerGroupedOrder, whatever its
  // dtype order), and two where a layer is split across two files; the result has no
  // projections (has_projections()).
  // A MoE layer's routed experts (either checkpoint layout) are staged with its attention
  // projections and not kept either (layers()[i].moe.experts empty); its router stays.
  // REQUIRES (both): `alloc` outlives the weights and whatever is made from them.
  static Result<Qwen3Weights> Load(const TransformerConfig& config,
                                   const SafetensorsReader& reader, kernels::Allocator& alloc,
                                   kernels::Stream stream, const ProjectionSink& sink = {});
  // Random weights for benchmarks and tests: linear weights uniform in +-`scale`/sqrt(in),
  // norm weights uniform in [0.8, 1.2), embeddings and LM head uniform in
  // +-RandomHeadBound(config.initializer_range, scale); generated on
  // `alloc`'s device from Philox stream `seed` (same values on the CPU and the GPU).
  // With a `sink`, as Load: projections go to it layer by layer (same values) and are not kept.
  static Result<Qwen3Weights> Random(const TransformerConfig& config, kernels::Allocator& alloc,
                                     uint64_t seed, kernels::Stream stream, float scale = 1.f,
                                     const ProjectionSink& sink = {});

  // The bytes of the largest one-layer staging buffer a load or Random with a sink
  // allocates: a dense layer's seven projections, or a MoE layer's four attention
  // projections and all its routed experts, in bf16 (each 256-byte aligned).
  static int64_t StagingBytes(const TransformerConfig& config);

  // Drops the bf16 q/k/v/o, gate|up and down weights and a MoE layer's experts (after an FP8
  // copy was made of them: models/qwen3/qwen3_fp8.h); routers stay. The remaining parameters
  // move to a new, smaller allocation and the layers' projection views become empty.
  // Returns once the copies are done.
  Status ReleaseProjections(kernels::Stream stream);
  bool has_projections() const { return layers_.empty() || !layers_[0].q_proj.empty(); }

  // A non-owning copy: the same parameter views and no storage of its own (nbytes() 0), for
  // a second model over weights already on the device (e.g. the decoder of an evaluation
  // during training beside the job's target, with a workspace of its own). REQUIRES: this
  // object outlives the alias and keeps its buffers (no ReleaseProjections) meanwhile.
  Qwen3Weights Alias() const;

  Qwen3Weights() = default;
  Qwen3Weights(Qwen3Weights&&) = default;
  Qwen3Weights& operator=(Qwen3Weights&&) = default;

  const TransformerConfig& config() const { return config_; }
  kernels::Device device() const { return embed_.device(); }
  // Where the weights came from (an alias: the original's); a model allocates its workspace
  // there too.
  kernels::Allocator& allocator() const { return *allocator_; }
  int64_t nbytes() const { return storage_.nbytes(); }

  kernels::TensorView embed() const { return embed_; }        // bf16 [V, H]
  kernels::TensorView final_norm() const { return final_norm_; }  // bf16 [H]
  kernels::TensorView lm_head() const { return lm_head_; }    // bf16 [V, H]; == embed if tied
  const std::vector<Qwen3LayerWeights>& layers() const { return layers_; }

 private:
  // Lays out every parameter in one buffer from `alloc` and sets the views.
  // `projections` false: the layers' projection views stay empty (a sink receives them).
  static Result<Qwen3Weights> Allocate(const TransformerConfig& config, kernels::Allocator& alloc,
                                       kernels::Stream stream, bool projections,
                                       ExpertLayout layout = ExpertLayout::kPerExpert);
  // The view that checkpoint tensor `name` fills, or an empty view when it is not a weight.
  kernels::TensorView Destination(const std::string& name) const;

  TransformerConfig config_;
  kernels::Tensor storage_;  // u8 [nbytes]: every parameter
  kernels::Allocator* allocator_ = nullptr;  // where storage_ came from
  kernels::TensorView embed_, final_norm_, lm_head_;
  std::vector<Qwen3LayerWeights> layers_;
  std::unordered_map<std::string, kernels::TensorView> by_name_;  // HF name -> parameter
};

}  // namespace tandem::models
