// Hugging Face `config.json` for the decoder-only transformers tandem runs: Qwen3
// (`model_type: qwen3`, q/k RMSNorm), Llama-3 (`model_type: llama`, the same layers
// without q/k norms) and Qwen3-MoE (`model_type: qwen3_moe`: Qwen3 attention with
// mixture-of-experts feed-forward blocks, MoeConfig; hf_config_moe.cc). Per-layer attention types, head dims and the RoPE variant are kept as
// data so a hybrid model can be added later; anything tandem does not implement (a RoPE
// scaling type, a non-attention layer type, biases, another activation, a hybrid model
// type) is rejected with a message naming the file and the key, never ignored.
//
// Both spellings transformers has used are read: `rope_theta` + `rope_scaling` (4.x) and
// `rope_parameters` (5.x); `torch_dtype` (4.x) and `dtype` (5.x).
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels/core/dtype.h"
#include "runtime/core/status.h"

namespace tandem::models {

enum class ModelFamily : uint8_t { kQwen3, kLlama };
enum class LayerType : uint8_t { kFullAttention, kSlidingAttention };
enum class RopeType : uint8_t { kDefault };  // plain RoPE over the first rotary_dim dims

std::string_view LayerTypeName(LayerType t);  // "full_attention" / "sliding_attention"

// The mixture-of-experts keys of a qwen3_moe config.json (transformers' Qwen3MoeConfig), or
// of a qwen3_5_moe text config (Qwen3_5MoeTextConfig: every layer MoE, the top-k weights
// always renormalised, plus a shared expert with a sigmoid gate).
struct MoeConfig {
  int64_t num_experts = 0;             // `num_experts` (or Mixtral's `num_local_experts`)
  int64_t num_experts_per_tok = 0;     // top-k, 1..min(num_experts, 32)
  int64_t moe_intermediate_size = 0;   // each expert's MLP width
  bool norm_topk_prob = false;         // renormalise the k routing weights (HF default false)
  int64_t decoder_sparse_step = 1;     // layer i is MoE iff (i + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers;  // ... and i is not listed here (those are dense)
  // The shared expert's MLP width (`shared_expert_intermediate_size`); 0: none (qwen3_moe).
  int64_t shared_expert_intermediate_size = 0;

  bool IsMoeLayer(int64_t layer) const;  // by the rule above
};

// Whose MoE keys ParseMoeKeys reads: qwen3_moe's, or qwen3_5_moe's (no dense layers, no
// norm_topk_prob = false, a shared expert required).
enum class MoeFamily : uint8_t { kQwen3Moe, kQwen35Moe };

// The MoE keys of config object `j` of a model with `num_hidden_layers` layers.
// InvalidArgument naming `source` and the key (spelled `key_prefix` + key, e.g.
// "text_config.num_experts"): a top-k above the expert count or the 32 implemented, an
// expert count outside what kernels/moe runs, and what `family` does not have (a shared
// expert in qwen3_moe; dense layers or unnormalised weights in qwen3_5_moe).
Result<MoeConfig> ParseMoeKeys(const nlohmann::json& j, std::string_view source,
                               std::string_view key_prefix, int64_t num_hidden_layers,
                               MoeFamily family);
// The MoE keys ParseMoeKeys reads or accepts (for a job file's `target_config`).
const std::vector<std::string>& MoeConfigKeys();

struct TransformerConfig {
  ModelFamily family = ModelFamily::kQwen3;
  std::string model_type;                 // "qwen3" or "llama"
  std::vector<std::string> architectures;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;                   // default hidden_size / num_attention_heads
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  // HF's initializer_range (the std of a fresh model's weights). Used only by random
  // weights: it sets the embedding and LM head spread (RandomHeadBound).
  std::optional<double> initializer_range;
  bool tie_word_embeddings = false;
  bool qk_norm = true;                    // Qwen3: RMSNorm on q and k per head
  RopeType rope_type = RopeType::kDefault;
  double rope_theta = 10000.0;
  int64_t rotary_dim = 0;                 // == head_dim for the families supported now
  std::vector<LayerType> layer_types;     // one per layer
  std::optional<int64_t> sliding_window;  // set iff some layer is sliding
  kernels::DType dtype = kernels::DType::kBF16;  // the checkpoint's dtype
  // quantization_config {quant_method: fp8, weight_block_size: [128, 128]}: the linear
  // weights may be F8_E4M3 with `*.weight_scale_inv` (models/io/fp8_checkpoint.h).
  bool fp8_block_weights = false;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<MoeConfig> moe;  // set iff model_type is qwen3_moe

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  // Whether decoder layer `layer` has a mixture-of-experts block (else a dense MLP of
  // intermediate_size), by transformers' rule (decoder_sparse_step, mlp_only_layers).
  bool IsMoeLayer(int64_t layer) const;
  // Whether some layer has a dense MLP (every layer of a dense model).
  bool HasDenseMlp() const;
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
};

// The bound b of the uniform [-b, b) that random embedding and LM head weights are drawn
// from: sqrt(3) * initializer_range (std = initializer_range, as a fresh HF model) when the
// config sets it, else `scale` (tandem's default of 1: logits with a std of ~0.6 * |h|, far
// larger than a trained model's).
inline float RandomHeadBound(const std::optional<double>& initializer_range, float scale) {
  return initializer_range ? static_cast<float>(1.7320508075688772 * *initializer_range) : scale;
}

// `source` names the file in messages ("/models/Qwen3-8B/config.json").
// InvalidArgument for bad or unsupported values, naming `source` and the key.
Result<TransformerConfig> ParseTransformerConfig(const nlohmann::json& j, std::string_view source);
// `j`'s quantization_config (absent: *fp8_block_weights = false): only the FP8 block layout
// of the official Qwen / DeepSeek-V3 FP8 checkpoints (quant_method "fp8", e4m3,
// weight_block_size [128, 128], dynamic activations) sets *fp8_block_weights; anything else
// is InvalidArgument naming `source` and the key. Shared by every target family's parser.
Status ParseFp8QuantizationConfig(const nlohmann::json& j, std::string_view source,
                                  bool* fp8_block_weights);
// `j`'s initializer_range: nullopt when absent or null, else a finite number > 0 (anything
// else is InvalidArgument naming `source` and the key). Shared by every target family.
Result<std::optional<double>> ParseInitializerRange(const nlohmann::json& j,
                                                    std::string_view source);
Result<TransformerConfig> ParseTransformerConfigText(std::string_view text,
                                                     std::string_view source);
// `path` is a config.json or a directory holding one.
Result<TransformerConfig> LoadTransformerConfig(const std::string& path);

// The top-level keys ParseTransformerConfig reads. A config.json of a checkpoint carries
// more (transformers_version, ...), which the parser ignores; a `target_config` table typed
// into a job file may use only these, so a typo is an error instead of a silent default.
const std::vector<std::string>& TransformerConfigKeys();
// InvalidArgument naming `source` and the first key of the object `j` that is not in
// `known` (with the closest known key as a hint); Ok when all are known.
Status CheckOnlyKnownKeys(const nlohmann::json& j, const std::vector<std::string>& known,
                          std::string_view source);

// The HF spelling (transformers 5: `rope_parameters`, `dtype`, `layer_types`), readable by
// ParseTransformerConfig and by transformers.
nlohmann::json TransformerConfigToJson(const TransformerConfig& c);

// Internal functions shared with the drafter config; `source` names the file.
namespace config_detail {
// The MoE keys of a qwen3_moe config into c->moe (hf_config_moe.cc); InvalidArgument naming
// `source` and the key (a top-k above the expert count, a shared expert, ...).
Status ParseMoeConfig(const nlohmann::json& j, std::string_view source, TransformerConfig* c);
// Writes c.moe's keys into `j` (nothing for a dense config).
void MoeConfigToJson(const TransformerConfig& c, nlohmann::json* j);
Result<int64_t> GetInt(const nlohmann::json& j, std::string_view source, const char* key,
                       std::optional<int64_t> fallback = std::nullopt);
Result<std::vector<int64_t>> GetIntList(const nlohmann::json& j, std::string_view source,
                                        const char* key);
}  // namespace config_detail

}  // namespace tandem::models
