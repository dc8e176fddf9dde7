// Private to models/qwen3: what Qwen3Weights and Qwen3Head (the embedding and LM head
// alone) share, so random heads equal the heads of random whole models bit for bit; and the
// per-layer staging of projections (and a MoE layer's routed experts) that Qwen3Weights
// hands to a ProjectionSink.
//
// Thread-safety: functions; FillRandomWeight's work is ordered on `stream`.
// ProjectionStaging is thread-compatible (one loader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/memory.h"
#include "models/io/weight_spec.h"
#include "models/qwen3/qwen3_weights.h"
#include "runtime/core/status.h"

namespace tandem::models {

// f32 scratch elements per random fill.
inline constexpr int64_t kRandomChunk = int64_t{1} << 24;

// Fills `dst` (bf16, s.shape) with weight `s`'s random values: Philox stream `seed`, offset
// (index << 20) + chunk for each kRandomChunk-element chunk, where `index` is s's position
// in CausalLmWeightSpecs; norms uniform in [0.8, 1.2), embeddings and LM head in
// +-head_bound (RandomHeadBound), other matrices in +-scale/sqrt(in). `scratch`: f32
// [kRandomChunk] on dst's device.
Status FillRandomWeight(const WeightSpec& s, size_t index, kernels::TensorView dst,
                        uint64_t seed, float scale, float head_bound,
                        const kernels::Tensor& scratch,
                        kernels::Stream stream);

// A tensor that ProjectionStaging receives instead of Qwen3Weights: a layer's attention
// projections, a dense layer's MLP, or a MoE layer's routed experts in either checkpoint
// layout (models/io/weight_spec.h's ExpertLayout).
//   "model.layers.{i}.self_attn.{q,k,v,o}_proj.weight"         kinds 0..3
//   "model.layers.{i}.mlp.{gate,up,down}_proj.weight"          kinds 4..6 (a dense MLP)
//   "model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight"  kinds 7..9, expert e
//   "model.layers.{i}.mlp.experts.{gate_up,down}_proj"         kinds 10, 11 (fused, [E, ...])
// ParseProjectionName gives nullopt for any other name (norms, the router, embeddings).
struct ProjectionName {
  int64_t layer = 0;
  int kind = 0;
  int64_t expert = 0;  // kinds 7..9 only
};
inline constexpr int kProjectionsPerLayer = 7;  // a dense layer's tensors (kinds 0..6)
inline constexpr int kAttentionProjections = 4;  // kinds 0..3, in every layer
inline constexpr int kExpertGate = 7, kExpertUp = 8, kExpertDown = 9;
inline constexpr int kFusedGateUp = 10, kFusedDown = 11;
std::optional<ProjectionName> ParseProjectionName(std::string_view name);

// The order a staged load reads `reader`'s tensors in (indices into reader.tensors()): file
// order, except that within a file the staged tensors of one layer (ParseProjectionName)
// are read together, at the place of the layer's first one. A file sorted by name keeps its
// order (a layer's tensors are adjacent); one sorted by dtype first (Hugging Face's writers
// put wider dtypes first, e.g. an f32 o_proj before the bf16 rest) would otherwise open
// every layer's staging buffer before completing any.
std::vector<size_t> LayerGroupedOrder(const SafetensorsReader& reader);

// One staging buffer per layer whose projections are being read: allocated on the first
// tensor of the layer, handed to the sink when all have arrived (a dense layer's seven; a
// MoE layer's four attention projections and its experts: 3 E tensors per expert, or the two
// fused ones), then freed (stream-ordered, so the sink's work on `stream` may still read
// it). A MoE layer's staged views hold q/k/v/o and moe.experts ([E, 2I, H] and [E, H, I]).
class ProjectionStaging {
 public:
  // `layout`: how the checkpoint stores the experts; a tensor of the other layout, a dense
  // MLP tensor of a MoE layer or an expert of a dense layer is not staged (Destination gives
  // an empty view: not a parameter of this model). REQUIRES: `alloc` outlives the staging.
  ProjectionStaging(const TransformerConfig& config, kernels::Allocator& alloc,
                    const ProjectionSink& sink, kernels::Stream stream,
                    ExpertLayout layout = ExpertLayout::kPerExpert)
      : config_(config), alloc_(alloc), device_(alloc.device()), sink_(sink), stream_(stream),
        layout_(layout) {}
  // Bytes of layer `layer`'s staging buffer (each tensor 256-byte aligned), and the largest
  // over the layers of `config`.
  static int64_t LayerBytes(const TransformerConfig& config, int64_t layer);
  static int64_t MaxLayerBytes(const TransformerConfig& config);
  // Where projection `p` is written (bf16, the checkpoint's shape); an empty view when `p`
  // is not a tensor of its layer in this layout. DataLoss naming the tensor when it already
  // arrived, when its layer was complete, or for an expert the config does not have;
  // InvalidArgument for a layer the config does not have.
  Result<kernels::TensorView> Destination(const ProjectionName& p);
  // Counts one written tensor of `p.layer` (after Destination gave a view for it); runs the
  // sink when the layer is complete.
  Status Arrived(const ProjectionName& p);
  // The staged tensors of every layer together (what a complete load writes here).
  int64_t ExpectedTensors() const;
  // DataLoss naming the first layer not handed to the sink and its first missing tensor.
  Status CheckComplete() const;

 private:
  struct Slot {
    kernels::Tensor buffer;
    Qwen3LayerWeights views;
    std::vector<bool> arrived;  // by TensorIndex
    int count = 0;
    bool done = false;
  };
  int TensorsPerLayer(int64_t layer) const;
  // p's position among its layer's staged tensors, or -1 when it is not one of them.
  int TensorIndex(const ProjectionName& p) const;
  // The checkpoint name of tensor `index` of `layer` (for messages).
  std::string TensorName(int64_t layer, int index) const;
  Status AllocateSlot(int64_t layer, Slot& slot);
  kernels::TensorView View(const Slot& slot, int64_t layer, int index) const;

  TransformerConfig config_;
  kernels::Allocator& alloc_;
  kernels::Device device_;
  const ProjectionSink& sink_;
  kernels::Stream stream_;
  ExpertLayout layout_;
  std::map<int64_t, Slot> slots_;
};

}  // namespace tandem::models
