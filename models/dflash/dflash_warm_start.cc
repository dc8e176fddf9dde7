// Warm start from a drafter checkpoint: see dflash_warm_start.h.
#include "models/dflash/dflash_warm_start.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::models {
namespace {

std::string Show(int64_t v) { return std::to_string(v); }
std::string Show(double v) { return fmt::format("{}", v); }
std::string Show(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
std::string Show(const std::optional<int64_t>& v) { return v ? Show(*v) : "none"; }
std::string Show(const std::optional<double>& v) { return v ? Show(*v) : "none"; }
std::string Show(bool v) { return v ? "DFlash2DraftModel" : "DFlashDraftModel"; }
std::string Show(const std::optional<bool>& v) {
  return v ? (*v ? "true" : "false") : "absent (the per-layer rule)";
}
std::string Show(const std::vector<LayerType>& v) {
  std::vector<std::string_view> names;
  for (LayerType t : v) names.push_back(LayerTypeName(t));
  return fmt::format("[{}]", fmt::join(names, ", "));
}

}  // namespace

std::optional<DFlashConfigMismatch> FindDFlashConfigMismatch(const DFlashConfig& have,
                                                             const DFlashConfig& want) {
  const TransformerConfig &h = have.layers, &w = want.layers;
  std::optional<DFlashConfigMismatch> m;
  auto check = [&](const char* key, const auto& a, const auto& b, bool other_target = false) {
    if (!m && !(a == b)) m = DFlashConfigMismatch{key, Show(a), Show(b), other_target};
  };
  check("vocab_size", h.vocab_size, w.vocab_size, true);
  check("hidden_size", h.hidden_size, w.hidden_size, true);
  check("num_hidden_layers", h.num_hidden_layers, w.num_hidden_layers);
  check("num_attention_heads", h.num_attention_heads, w.num_attention_heads);
  check("num_key_value_heads", h.num_key_value_heads, w.num_key_value_heads);
  check("head_dim", h.head_dim, w.head_dim);
  check("intermediate_size", h.intermediate_size, w.intermediate_size);
  check("layer_types", h.layer_types, w.layer_types);
  check("sliding_window", h.sliding_window, w.sliding_window);
  check("is_causal", have.is_causal, want.is_causal);
  check("block_size", have.block_size, want.block_size);
  check("dflash_config.mask_token_id", have.mask_token_id, want.mask_token_id);
  check("dflash_config.target_layer_ids", have.target_layer_ids, want.target_layer_ids);
  check("rope_theta", h.rope_theta, w.rope_theta);
  check("rms_norm_eps", h.rms_norm_eps, w.rms_norm_eps);
  check("architectures", have.dflash2.has_value(), want.dflash2.has_value());
  if (!m && have.dflash2 && want.dflash2) {
    const DFlash2Extension &a = *have.dflash2, &b = *want.dflash2;
    check("dflash_config.conv_kernel_size", a.conv_kernel_size, b.conv_kernel_size);
    check("dflash_config.conv_group_size", a.conv_group_size, b.conv_group_size);
    check("dflash_config.selector_rank", a.selector_rank, b.selector_rank);
    check("dflash_config.selector_top_k", a.selector_top_k, b.selector_top_k);
    check("dflash_config.output_multiplier", a.output_multiplier, b.output_multiplier);
    check("dflash_config.final_logit_softcapping", a.final_logit_softcapping,
          b.final_logit_softcapping);
    check("dflash_config.input_embedding_scale", a.input_embedding_scale,
          b.input_embedding_scale);
  }
  return m;
}

}  // namespace tandem::models
