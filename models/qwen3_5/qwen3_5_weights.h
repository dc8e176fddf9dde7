// The frozen text weights of a Qwen3.5 / Qwen3.6 hybrid (dense or mixture-of-experts), in
// one device allocation.
//
// Every parameter is a bf16 view carved from two buffers laid out once from the config: the
// layers' projection matrices in one (which ReleaseProjections frees once they have an FP8
// form), everything else in the other.
// Projections that read the same input are packed at load into one matrix, so each is one
// GEMM: a Gated DeltaNet layer's in_proj_qkv | in_proj_z | in_proj_b | in_proj_a, and every
// layer's gate_proj | up_proj (a MoE layer's shared expert's too). A MoE layer's experts are
// two [E, ...] matrices whichever layout the checkpoint stores them in (models/io/
// weight_spec.h: per expert, or transformers 5's fused `gate_up_proj` / `down_proj`).
// Loading reads the checkpoint in one pass over its files,
// converting fp32/fp16 tensors to bf16; names and shapes are checked against the config
// before anything is copied, and a missing or mis-shaped tensor is an error naming the
// tensor and its file. Tensors outside the text model (`model.visual.*`, `mtp.*`, caches)
// are not read.
//
// Thread-safety: immutable after Load; views may be read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "kernels/moe/moe_layer.h"
#include "models/io/safetensors.h"
#include "models/io/weight_spec.h"
#include "models/qwen3_5/qwen3_5_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

// Gated DeltaNet token mixer (hk/hv key/value heads of dk/dv, C = 2*hk*dk + hv*dv).
struct Qwen35LinearAttentionWeights {
  kernels::TensorView in_proj;   // bf16 [C + hv*dv + 2*hv, H]: qkv | z | b | a rows
  kernels::TensorView conv1d;    // bf16 [C, K] (checkpoint [C, 1, K])
  kernels::TensorView a_log;     // bf16 [hv]
  kernels::TensorView dt_bias;   // bf16 [hv]
  kernels::TensorView norm;      // bf16 [dv]: the gated RMSNorm's plain weight
  kernels::TensorView out_proj;  // bf16 [H, hv*dv]
};

// Gated attention token mixer (hq/hk heads of d).
struct Qwen35AttentionWeights {
  kernels::TensorView q_proj;  // bf16 [2*hq*d, H]: per head d query rows then d gate rows
  kernels::TensorView k_proj;  // bf16 [hk*d, H]
  kernels::TensorView v_proj;  // bf16 [hk*d, H]
  kernels::TensorView q_norm;  // bf16 [d] (zero-centred)
  kernels::TensorView k_norm;  // bf16 [d] (zero-centred)
  kernels::TensorView o_proj;  // bf16 [H, hq*d]
};

struct Qwen35LayerWeights {
  HybridLayerType type = HybridLayerType::kLinearAttention;
  kernels::TensorView input_norm;       // bf16 [H] (zero-centred)
  kernels::TensorView post_norm;        // bf16 [H] (zero-centred)
  Qwen35LinearAttentionWeights linear;  // set for linear_attention layers
  Qwen35AttentionWeights attn;          // set for full_attention layers
  kernels::TensorView gate_up;          // bf16 [2I, H]: rows [0, I) gate_proj, [I, 2I) up_proj
  kernels::TensorView down_proj;        // bf16 [H, I]
  // A MoE config (config.moe) has these instead of gate_up / down_proj: the router [E, H],
  // the experts [E, 2I, H] / [E, H, I], the shared expert [2Is, H] / [H, Is] and its gate
  // [1, H] (kernels/moe/moe_layer.h).
  kernels::MoeLayerWeights moe;
};

// Every checkpoint tensor the text model needs (HF names under config.weight_prefix, plus
// lm_head.weight unless tied), in layer order; a MoE layer's experts in `layout` (random
// weights use the fused one).
std::vector<WeightSpec> Qwen35WeightSpecs(const Qwen35Config& c,
                                          ExpertLayout layout = ExpertLayout::kFused);

// Takes one layer's bf16 projection matrices as they are read (`staged`: type and the
// projection views set, the rest empty; valid for work enqueued on `stream` before the sink
// returns). Given to Load / Random, the projections are never all on the device at once:
// e.g. Qwen35Fp8Projections::QuantizeLayer, so an FP8 load peaks at the e4m3 model plus one
// bf16 layer.
using Qwen35ProjectionSink =
    std::function<Status(int64_t layer, const Qwen35LayerWeights& staged, kernels::Stream)>;

class Qwen35Weights {
 public:
  // Loads every weight `config` needs from `reader` into memory from `alloc` (copies ordered
  // on `stream`; returns after they have completed). Other tensors are ignored.
  // REQUIRES: `alloc` outlives the weights and whatever is made from them.
  // An official FP8 checkpoint (config.fp8_block_weights) has its F8_E4M3 matrices
  // dequantized to bf16 with their 128x128 `weight_scale_inv` as they are read.
  // Errors: NotFound / DataLoss naming the file and tensor (missing, wrong shape, not a
  // float dtype, FP8 scales that do not match their weight), OutOfMemory.
  // With `sink`, each layer's projections go to it through a staging buffer instead of
  // being kept (has_projections() is then false); a MoE layer's projections are its experts
  // and shared expert (its router and shared-expert gate are kept).
  // A MoE checkpoint's expert layout is detected, and an expert count that disagrees with
  // the config is DataLoss naming the tensor and the file (DetectExpertLayout).
  static Result<Qwen35Weights> Load(const Qwen35Config& config, const SafetensorsReader& reader,
                                    kernels::Allocator& alloc, kernels::Stream stream,
                                    const Qwen35ProjectionSink& sink = {});
  // Random weights of `config` in memory from `alloc` (tests, benchmarks, jobs with
  // model = "random"): each tensor from its own Philox stream (`seed`, offset by its index
  // in Qwen35WeightSpecs), so Qwen35Head::Random gives the same embedding and LM head.
  // Matrices uniform in +-scale/sqrt(in), embedding and LM head in
  // +-RandomHeadBound(config.initializer_range, scale), zero-centred
  // norms in +-0.1 (so 1 + w is near 1), the gated norm in [0.8, 1.2), A_log and dt_bias in
  // [0, 1). Ordered on `stream`; returns after the fills have completed.
  // REQUIRES: `alloc` outlives the weights and whatever is made from them.
  // With `sink`, as for Load (the same values, layer by layer).
  static Result<Qwen35Weights> Random(const Qwen35Config& config, kernels::Allocator& alloc,
                                      uint64_t seed, kernels::Stream stream, float scale = 1.f,
                                      const Qwen35ProjectionSink& sink = {});

  Qwen35Weights() = default;
  Qwen35Weights(Qwen35Weights&&) = default;
  Qwen35Weights& operator=(Qwen35Weights&&) = default;

  const Qwen35Config& config() const { return config_; }
  kernels::Device device() const { return embed_.device(); }
  // Where the weights came from; the target allocates its workspace there too.
  kernels::Allocator& allocator() const { return *allocator_; }
  int64_t nbytes() const { return storage_.nbytes() + projections_.nbytes(); }

  // Frees the layers' projection matrices (in_proj, out_proj, q/k/v/o, gate|up, down; a MoE
  // layer's experts and shared expert, not its router or shared-expert gate) once
  // an FP8 form of them exists (qwen3_5_fp8.h); their views become empty. Waits for `stream`
  // first, so work enqueued on it that reads them completes. Everything else stays.
  Status ReleaseProjections(kernels::Stream stream);
  bool has_projections() const {
    return !layers_.empty() && !(layers_[0].type == HybridLayerType::kLinearAttention
                                     ? layers_[0].linear.in_proj.empty()
                                     : layers_[0].attn.q_proj.empty());
  }

  // The same parameters, owning nothing (an alias's nbytes() is 0): a second target with
  // its own workspace over one copy of the weights (the drafter's evaluation decoder).
  // REQUIRES: this object outlives the alias and keeps its projections meanwhile.
  Qwen35Weights Alias() const;

  kernels::TensorView embed() const { return embed_; }            // bf16 [V, H]
  kernels::TensorView final_norm() const { return final_norm_; }  // bf16 [H] (zero-centred)
  kernels::TensorView lm_head() const { return lm_head_; }        // bf16 [V, H]
  const std::vector<Qwen35LayerWeights>& layers() const { return layers_; }

 private:
  // Without projections: their names are left out (a sink takes them).
  static Result<Qwen35Weights> Allocate(const Qwen35Config& config, kernels::Allocator& alloc,
                                        kernels::Stream stream, bool with_projections,
                                        ExpertLayout layout = ExpertLayout::kFused);
  kernels::TensorView Destination(const std::string& name) const;

  Qwen35Config config_;
  kernels::Tensor storage_;      // u8: every parameter but the projections
  kernels::Tensor projections_;  // u8: the layers' projection matrices (may be released)
  kernels::Allocator* allocator_ = nullptr;  // where the weights came from
  kernels::TensorView embed_, final_norm_, lm_head_;
  std::vector<Qwen35LayerWeights> layers_;
  std::unordered_map<std::string, kernels::TensorView> by_name_;  // HF name -> parameter
};

// The token embedding and LM head alone, for a DFlash drafter on a GPU without a target
// replica (2 matrices instead of the whole model). Load reads only those two tensors
// (converted to bf16, shapes checked against the config; errors name the file and the
// tensor); Random gives the values of Qwen35Weights::Random for the same config and seed.
// A tied model has one matrix, returned as both. Memory comes from `alloc`, which must
// outlive the head.
class Qwen35Head {
 public:
  static Result<Qwen35Head> Load(const std::string& dir, const Qwen35Config& config,
                                 kernels::Allocator& alloc, kernels::Stream stream);
  static Result<Qwen35Head> Random(const Qwen35Config& config, kernels::Allocator& alloc,
                                   uint64_t seed, kernels::Stream stream, float scale = 1.f);

  kernels::TensorView embed() const { return embed_; }      // bf16 [V, H]
  kernels::TensorView lm_head() const { return lm_head_; }  // bf16 [V, H]; == embed if tied
  int64_t nbytes() const { return storage_.nbytes(); }

 private:
  static Result<Qwen35Head> Allocate(const Qwen35Config& config, kernels::Allocator& alloc,
                                     kernels::Stream stream);
  kernels::Tensor storage_;  // bf16 [1 or 2, V, H]
  kernels::TensorView embed_, lm_head_;
};

}  // namespace tandem::models
