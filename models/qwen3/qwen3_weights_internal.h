// Private to models/qwen3: what Qwen3Weights and Qwen3Head (the embedding and LM head
// alone) share, so random heads equal the heads of random whole models bit for bit; and the
// per-layer staging of projections that Qwen3Weights hands to a ProjectionSink.
//
// Thread-safety: functions; FillRandomWeight's work is ordered on `stream`.
// ProjectionStaging is thread-compatible (one loader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

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

// "model.layers.{i}.self_attn.{q,k,v,o}_proj.weight" / "...mlp.{gate,up,down}_proj.weight":
// the layer and which projection (0..6 in that order); nullopt for any other name.
struct ProjectionName {
  int64_t layer = 0;
  int kind = 0;  // 0 q, 1 k, 2 v, 3 o, 4 gate, 5 up, 6 down
};
inline constexpr int kProjectionsPerLayer = 7;
std::optional<ProjectionName> ParseProjectionName(std::string_view name);

// One staging buffer per layer whose projections are being read: allocated on the first
// tensor of the layer, handed to the sink when all seven have arrived, then freed (stream-
// ordered, so the sink's work on `stream` may still read it).
class ProjectionStaging {
 public:
  // REQUIRES: `alloc` outlives the staging.
  ProjectionStaging(const TransformerConfig& config, kernels::Allocator& alloc,
                    const ProjectionSink& sink, kernels::Stream stream)
      : config_(config), alloc_(alloc), device_(alloc.device()), sink_(sink), stream_(stream) {}
  // Where projection `p` is written (bf16, the checkpoint's shape).
  Result<kernels::TensorView> Destination(const ProjectionName& p);
  // Counts one written tensor of `p.layer`; runs the sink when the layer is complete.
  Status Arrived(const ProjectionName& p);
  // InvalidArgument naming the first layer not handed to the sink (some tensor missing).
  Status CheckComplete() const;

 private:
  struct Slot {
    kernels::Tensor buffer;
    Qwen3LayerWeights views;
    kernels::TensorView gate, up;  // the halves of views.gate_up
    int arrived = 0;
    bool done = false;
  };
  TransformerConfig config_;
  kernels::Allocator& alloc_;
  kernels::Device device_;
  const ProjectionSink& sink_;
  kernels::Stream stream_;
  std::map<int64_t, Slot> slots_;
};

}  // namespace tandem::models
