// Helpers for the end-to-end DFlash job tests: the tiny CPU job (random 6-layer target feeding
// a 1-layer drafter through one channel) as TOML text, a fresh checkpoint folder, running a
// job text through JobRunner, and reading the evaluations from its metrics file. Test-only. Thread-safety: free functions, no shared state.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/dflash/drafter_faults.h"
#include "models/io/hf_config.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/runner.h"
#include "tests/support/scratch_dir.h"

namespace tandem::dflash::testing {

// What varies between the tiny jobs; the rest (model sizes, lr, anchors, logging) is fixed.
// Every member has a default initializer, so designated initializers may leave any out
// (-Wmissing-field-initializers).
struct TinyJob {
  std::string name{};           // [job] name; the text is parsed as "<name>.toml"
  int batches_per_epoch = 400;  // per target replica
  int max_steps = 0;            // per drafter replica
  std::string checkpoint_dir{};
  int checkpoint_every = 50;       // steps
  std::string checkpoint_extra{};  // more keys of the checkpoint table: ", async = false"
  std::string target_extra{};      // TOML lines added to [actors.target]
  std::string drafter_extra{};     // TOML lines added to [actors.drafter]
  std::string channel_extra{};     // TOML lines added to [channels.hidden]
  // "": random weights of TinyTargetConfig(); else an HF directory holding a target of that
  // config (e.g. tests/eval/rule_target.h's, which continues text the way the data does).
  std::string model{};
  // More keys of the random target's target_config table (model = ""), each with a leading
  // ", ": e.g. a qwen3_moe model_type and its expert keys.
  std::string target_config_extra{};
  // Faults injected into the drafters (drafter_faults.h); none by default.
  DrafterFaults::Plan faults{};
};

// The tiny target's config (what `target_config` of the tiny job says).
inline models::TransformerConfig TinyTargetConfig() {
  models::TransformerConfig c;
  c.family = models::ModelFamily::kQwen3;
  c.model_type = "qwen3";
  c.architectures = {"Qwen3ForCausalLM"};
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.num_hidden_layers = 6;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.rotary_dim = 16;
  c.intermediate_size = 128;
  c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.qk_norm = true;
  c.layer_types.assign(6, models::LayerType::kFullAttention);
  return c;
}

// The [job] seed of the tiny job (its synthetic data's seed).
inline constexpr uint64_t kTinyJobSeed = 1;

inline std::string TinyJobText(const TinyJob& j) {
  const models::TransformerConfig c = TinyTargetConfig();
  const std::string model =
      !j.model.empty()
          ? fmt::format("model = \"{}\"", j.model)
          : fmt::format("model = \"random\"\ntarget_config = {{ vocab_size = {}, hidden_size = "
                        "{}, num_hidden_layers = {}, num_attention_heads = {}, "
                        "num_key_value_heads = {}, head_dim = {}, intermediate_size = {}, "
                        "max_position_embeddings = {}{} }}",
                        c.vocab_size, c.hidden_size, c.num_hidden_layers,
                        c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                        c.intermediate_size, c.max_position_embeddings, j.target_config_extra);
  return fmt::format(R"(
[job]
name = "{}"
seed = {}
[store]
capacity_mb = 32
[channels.hidden]
capacity = 4
min_ready = 1
{}
[actors.target]
class = "dflash.target"
out = "hidden"
{}
layers = [1, 4]
max_tokens = 256
doc_len = 64
batches_per_epoch = {}
{}
[actors.drafter]
class = "dflash.drafter"
in = "hidden"
num_layers = 1
max_steps = {}
lr = 3e-3
anchors_per_batch = 16
log_every = 10
checkpoint = {{ dir = "{}", every_steps = {}{} }}
pinned_bytes = 4194304  # the asynchronous checkpoints' snapshot (~0.7 MB here)
{}
)",
                     j.name, kTinyJobSeed, j.channel_extra, model, j.batches_per_epoch,
                     j.target_extra, j.max_steps, j.checkpoint_dir, j.checkpoint_every,
                     j.checkpoint_extra, j.drafter_extra);
}

// An empty folder `name` in this process's scratch directory (removed at exit). Not a fixed
// name under the shared TMPDIR: two processes running these tests at once never meet there.
inline std::string FreshDir(const std::string& name) {
  static const ::tandem::testing::ScratchDir root("dflash_jobs");
  std::string dir = root.File(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The "eval" records (in-training evaluations, drafter_eval.h) of a metrics JSONL file, in
// order.
inline std::vector<nlohmann::json> EvalRecords(const std::string& metrics_file) {
  std::vector<nlohmann::json> out;
  std::ifstream f(metrics_file);
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("kind", "") == "eval") out.push_back(j);
  }
  return out;
}

// Run options whose job registry carries `faults` (drafter_faults.h).
inline RunOptions WithFaults(const DrafterFaults::Plan& faults) {
  RunOptions o;
  o.registry = std::make_shared<JobRegistry>();
  o.registry->Get<DrafterFaults>().Set(faults);
  return o;
}

// Parses `job` and runs it to the end, with its faults; an error only when the text does not
// parse.
inline Result<JobReport> RunJob(const TinyJob& job) {
  ASSIGN_OR_RETURN(JobSpec spec, ParseJobText(TinyJobText(job), job.name + ".toml"));
  JobRunner runner(WithFaults(job.faults));
  return runner.Run(spec);
}

}  // namespace tandem::dflash::testing
