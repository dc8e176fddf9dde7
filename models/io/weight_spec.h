// The tensor names and shapes a Hugging Face checkpoint of a TransformerConfig must hold
// (Qwen3ForCausalLM / LlamaForCausalLM naming), and a check of a checkpoint against them,
// so a loader can reject a mismatched checkpoint in one message before copying anything.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/io/hf_config.h"
#include "models/io/safetensors.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct WeightSpec {
  std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // PyTorch Linear layout: [out_features, in_features]
};

// How a qwen3_moe checkpoint stores its experts: one tensor per expert and projection
// (`mlp.experts.{e}.{gate,up,down}_proj.weight`, the released checkpoints), or transformers
// 5's fused parameters (`mlp.experts.gate_up_proj` [E, 2I, H], gate rows first, and
// `mlp.experts.down_proj` [E, H, I]).
enum class ExpertLayout : uint8_t { kPerExpert, kFused };

// Every weight of the causal LM, in layer order. `lm_head.weight` is listed only when the
// embeddings are not tied. A MoE layer lists `mlp.gate.weight` [E, H] (the router) and its
// experts in `layout` instead of the dense MLP.
std::vector<WeightSpec> CausalLmWeightSpecs(const TransformerConfig& c,
                                            ExpertLayout layout = ExpertLayout::kPerExpert);

// One MoE layer's router `mlp.gate.weight` [E, H] and its experts in `layout`, named under
// `layer_prefix` ("model.layers.3."), appended to `specs`. (Shared by every MoE family.)
void AppendMoeExpertSpecs(const std::string& layer_prefix, int64_t hidden, const MoeConfig& m,
                          ExpertLayout layout, std::vector<WeightSpec>* specs);

// The layout `reader`'s checkpoint stores the experts of MoE config `c` in (kPerExpert for
// a dense config), after checking that the expert count agrees with the config: DataLoss
// naming the tensor and the file when a fused tensor holds another number of experts, or a
// per-expert tensor names an expert the config does not have; NotFound naming the first
// missing expert tensor (with how many experts the checkpoint holds).
Result<ExpertLayout> DetectExpertLayout(const SafetensorsReader& reader,
                                        const TransformerConfig& c);
// The same over explicit MoE layers: `moe_layer_prefixes` ("model.layers.3.", ...), each
// with `num_experts` experts (the first layer decides; CheckWeights checks the others).
Result<ExpertLayout> DetectExpertLayout(const SafetensorsReader& reader,
                                        const std::vector<std::string>& moe_layer_prefixes,
                                        int64_t num_experts);

// OK when every spec is present with its shape and a floating dtype (BF16/F16/F32).
// DataLoss naming the tensor and the file otherwise; NotFound for a missing tensor.
// Extra tensors (e.g. rotary caches some exporters add) are allowed.
// With `fp8_block_weights` (config.json's quantization_config), a 2-d spec may also be an
// F8_E4M3 weight with its `*_scale_inv` (CheckFp8BlockWeight).
Status CheckWeights(const SafetensorsReader& reader, const std::vector<WeightSpec>& specs,
                    bool fp8_block_weights = false);

}  // namespace tandem::models
