#include "actors/dflash/drafter_settings.h"

#include <algorithm>

#include "actors/dflash/checkpoint_state.h"

namespace tandem::dflash {

Result<DrafterSettings> ParseDrafterSettings(const ConfigValue& s_, const std::string& name,
                                             int64_t job_seed) {
  DrafterSettings d;
  ASSIGN_OR_RETURN(d.in, s_.GetString("in", ""));
  ASSIGN_OR_RETURN(d.target_group, s_.GetString("target", "target"));
  ASSIGN_OR_RETURN(d.num_layers, s_.GetInt("num_layers", 2));
  ASSIGN_OR_RETURN(d.max_steps, s_.GetInt("max_steps", 0));
  ASSIGN_OR_RETURN(d.total_steps, s_.GetInt("total_steps", d.max_steps));
  ASSIGN_OR_RETURN(d.log_every, s_.GetInt("log_every", 10));
  ASSIGN_OR_RETURN(d.max_bad_steps, s_.GetInt("max_bad_steps", 5));
  ASSIGN_OR_RETURN(d.fail_at_step, s_.GetInt("fail_at_step", -1));
  ASSIGN_OR_RETURN(d.resume, s_.GetBool("resume", false));
  ASSIGN_OR_RETURN(d.metrics_file, s_.GetString("metrics_file", ""));
  ASSIGN_OR_RETURN(d.max_seconds, s_.GetDouble("max_seconds", 0.0));
  ASSIGN_OR_RETURN(d.sliding_window, s_.GetInt("sliding_window", 0));
  ASSIGN_OR_RETURN(d.checkpoint_dir, CheckpointDir(s_));
  if (const ConfigValue* ck = s_.Find("checkpoint"); ck != nullptr) {
    ASSIGN_OR_RETURN(d.checkpoint_every, ck->GetInt("every_steps", 0));
  }
  if (d.in.empty()) return InvalidArgumentError("{}: dflash.drafter needs `in`", name);
  if (d.max_steps < 1 || d.total_steps < d.max_steps || d.log_every < 1)
    return InvalidArgumentError("{}: need max_steps >= 1, total_steps >= max_steps, "
                                "log_every >= 1", name);
  const int64_t num_layers = d.num_layers;
  d.layer_types.assign(num_layers, models::LayerType::kFullAttention);
  if (const ConfigValue* lt = s_.Find("layer_types"); lt != nullptr) {
    if (!lt->is_array() || static_cast<int64_t>(lt->array().size()) != num_layers)
      return InvalidArgumentError("{}: layer_types must list num_layers = {} entries", name,
                                  num_layers);
    for (int64_t i = 0; i < num_layers; ++i) {
      ASSIGN_OR_RETURN(std::string t, lt->array()[i].AsString());
      if (t == "sliding_attention") {
        d.layer_types[i] = models::LayerType::kSlidingAttention;
      } else if (t != "full_attention") {
        return InvalidArgumentError("{}: layer_types[{}] = \"{}\" (full_attention or "
                                    "sliding_attention)", name, i, t);
      }
    }
  }
  const bool any_sliding = std::count(d.layer_types.begin(), d.layer_types.end(),
                                      models::LayerType::kSlidingAttention) > 0;
  if (any_sliding != (d.sliding_window > 0))
    return InvalidArgumentError("{}: sliding_window > 0 is needed exactly when some layer "
                                "is sliding_attention", name);
  if (s_.Find("mask_token_id") != nullptr) {
    ASSIGN_OR_RETURN(int64_t mask_id, s_.GetInt("mask_token_id", 0));
    d.mask_token_id = mask_id;
  }
  ASSIGN_OR_RETURN(d.anchors_per_batch, s_.GetInt("anchors_per_batch", 64));
  ASSIGN_OR_RETURN(d.lr, s_.GetDouble("lr", 6e-4));
  ASSIGN_OR_RETURN(d.warmup_ratio, s_.GetDouble("warmup_ratio", 0.04));
  ASSIGN_OR_RETURN(d.noise_std, s_.GetDouble("noise_std", 0.05));
  ASSIGN_OR_RETURN(d.seed, s_.GetInt("seed", job_seed));
  return d;
}

}  // namespace tandem::dflash
