// The text model of a Qwen3.5 / Qwen3.6 hybrid checkpoint, read from config.json: Gated
// DeltaNet ("linear_attention") layers with a gated full-attention layer every
// `full_attention_interval`-th layer, each followed by a dense SwiGLU MLP, or in the
// mixture-of-experts variant (`qwen3_5_moe`, e.g. Qwen3.6-35B-A3B) by a MoE block: a softmax
// router picking the top-k of `num_experts` experts (weights always renormalised) plus a
// shared expert behind a sigmoid gate.
//
// Two layouts are accepted, for either variant:
//   * the vision-language wrapper (`Qwen3_5ForConditionalGeneration`, model_type `qwen3_5`;
//     `Qwen3_5MoeForConditionalGeneration`, `qwen3_5_moe`): the text fields sit in a nested
//     `text_config` (model_type `qwen3_5_text` / `qwen3_5_moe_text`) and the text weights
//     under `model.language_model.`; `model.visual.*` and `mtp.*` are not read;
//   * the text-only model (`Qwen3_5ForCausalLM` / `Qwen3_5MoeForCausalLM`, model_type
//     `qwen3_5_text` / `qwen3_5_moe_text` at the top), with weights under `model.`.
// Every field the forward uses is read from the file. What tandem does not implement is
// refused with a message naming the file and the key: expert keys in a dense model_type,
// dense layers in a MoE one (`mlp_only_layers`, `decoder_sparse_step`), unnormalised
// routing weights, layer types other than linear_attention / full_attention, a RoPE type
// other than "default", activations other than silu, attention biases, an ungated attention
// output. The multimodal RoPE fields (`mrope_section`, `mrope_interleaved`) are accepted:
// with text-only positions (the same position on all three axes) the interleaved mRoPE is
// plain 1-D RoPE on the first rotary_dim dims. Fields of the vision tower and the MTP head
// are ignored.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/dtype.h"
#include "models/io/hf_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

enum class HybridLayerType : uint8_t { kLinearAttention, kFullAttention };
std::string_view HybridLayerTypeName(HybridLayerType t);  // "linear_attention" / ...

struct Qwen35Config {
  std::string source;      // the config.json it came from (for messages)
  std::string model_type;  // top-level: qwen3_5, qwen3_5_text, qwen3_5_moe or qwen3_5_moe_text
  std::vector<std::string> architectures;
  std::string weight_prefix;  // "model.language_model." or "model."
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  // The dense MLP width; a MoE config has none (0) unless the file gives one, which only a
  // drafter's MLP uses.
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  std::optional<double> initializer_range;  // random weights only (RandomHeadBound)
  bool tie_word_embeddings = false;
  // An official FP8 checkpoint (quantization_config: e4m3 weights with 128x128
  // weight_scale_inv blocks): Qwen35Weights::Load dequantizes those weights to bf16.
  bool fp8_block_weights = false;
  kernels::DType dtype = kernels::DType::kBF16;  // the checkpoint's dtype
  std::vector<int64_t> eos_token_ids;             // eos_token_id (text_config's first)
  std::vector<HybridLayerType> layer_types;      // one per layer
  // Gated attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rope_theta = 0;
  double partial_rotary_factor = 0;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor, even
  // Gated DeltaNet.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;
  // The MoE variant (model_type qwen3_5_moe*): every layer's feed-forward block. Always
  // norm_topk_prob, a shared expert, no dense layers.
  std::optional<MoeConfig> moe;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  // Channels of in_proj_qkv and the conv: q | k | v.
  int64_t conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
};

// `source` names the file in messages. InvalidArgument for bad or unsupported values, naming
// `source` and the key (for a wrapper, "text_config.<key>").
Result<Qwen35Config> ParseQwen35Config(const nlohmann::json& j, std::string_view source);
// The top-level keys ParseQwen35Config reads (for a job file's `target_config` table, which
// may use only these: see CheckOnlyKnownKeys in models/io/hf_config.h).
const std::vector<std::string>& Qwen35ConfigKeys();
Result<Qwen35Config> ParseQwen35ConfigText(std::string_view text, std::string_view source);
// `path` is a config.json or a directory holding one.
Result<Qwen35Config> LoadQwen35Config(const std::string& path);

}  // namespace tandem::models
