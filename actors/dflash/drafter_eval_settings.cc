#include "actors/dflash/drafter_eval_settings.h"

#include <filesystem>

#include <fmt/format.h>

namespace tandem::dflash {

KeyTable EvalKeys() {
  KeyTable t("eval");
  t.Int("every_steps", "evaluate after every N training steps, on replica 0, between batches")
      .Required().Min(1);
  t.String("prompts", "held-out prompts: JSONL, one pre-tokenized prompt per line "
           "(\"input_ids\"), as `tandem eval --prompts`; must exist").Required();
  t.Int("max_prompts", "prompts decoded per evaluation (the file's first N usable ones)")
      .Default(8).Range(1, 1 << 20);
  t.Int("max_new_tokens", "tokens generated per prompt").Default(64).Range(1, 1 << 20);
  t.Int("max_prompt_tokens", "longer prompts are skipped and counted").Default(1024)
      .Range(1, 1 << 24);
  t.Number("max_seconds", "time budget of one evaluation: no prompt starts after it (0: "
           "none; tau then covers the prompts decoded)").Default(0.0).Range(0, 86400);
  t.Number("temperature", "0: greedy; above 0 speculative sampling (drafts sampled by the "
           "drafter, kept with probability min(1, p/q), seeded)").Default(0.0).Range(0, 100);
  t.Int("block_size", "slots the target verifies per step (1 = no drafting)").Range(1, 1024)
      .DefaultIs("the drafter's block_size");
  t.Bool("keep_best", "checkpoint the step of each new best tau and point CHECKPOINT_DIR/best "
         "at it (never removed by retention); needs checkpoint.dir")
      .DefaultIs("true when checkpoint.dir is set");
  t.Bool("at_end", "also evaluate after the last step").Default(true);
  return t;
}

Result<EvalSettings> ParseEvalSettings(const ConfigValue& section, const std::string& prefix,
                                       int64_t drafter_block_size,
                                       const std::string& checkpoint_dir) {
  static const KeyTable keys = EvalKeys();
  auto at = [&](std::string_view key) { return KeyPath(section, prefix, key); };
  EvalSettings e;
  e.enabled = true;
  e.every_steps = keys.GetInt(section, "every_steps");
  e.prompts = keys.GetString(section, "prompts");
  e.max_prompts = keys.GetInt(section, "max_prompts");
  e.max_new_tokens = keys.GetInt(section, "max_new_tokens");
  e.max_prompt_tokens = keys.GetInt(section, "max_prompt_tokens");
  e.max_seconds = keys.GetNumber(section, "max_seconds");
  e.temperature = keys.GetNumber(section, "temperature");
  e.block_size = keys.GetOptInt(section, "block_size").value_or(drafter_block_size);
  e.at_end = keys.GetBool(section, "at_end");
  e.keep_best = !checkpoint_dir.empty();
  if (section.Find("keep_best") != nullptr) e.keep_best = keys.GetBool(section, "keep_best");
  if (e.block_size > drafter_block_size)
    return InvalidArgumentError("{}: {} is above the drafter's block_size {}", at("block_size"),
                                e.block_size, drafter_block_size);
  if (e.keep_best && checkpoint_dir.empty())
    return InvalidArgumentError("{}: true needs checkpoint.dir (the best checkpoint is kept "
                                "there)", at("keep_best"));
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(e.prompts, ec))
    return InvalidArgumentError("{}: '{}' does not exist", at("prompts"), e.prompts);
  if (!fs::is_regular_file(e.prompts, ec))
    return InvalidArgumentError("{}: '{}' is not a regular file", at("prompts"), e.prompts);
  return e;
}

}  // namespace tandem::dflash
