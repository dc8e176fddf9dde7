// End to end on the CPU: train the tiny synthetic DFlash job, then measure the trained and
// an untrained drafter by real speculative decoding (RunSpecEval, as `tandem eval` does) on
// held-out prompts. The trained drafter's tau must be clearly above the untrained one's.
// The target knows the data's rule (rule_target.h), so a drafter trained on the data can
// agree with it.
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "kernels/core/memory.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/io/hf_config.h"
#include "models/speculative/spec_eval_run.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/runner.h"
#include "tests/eval/rule_target.h"
#include "tests/support/scratch_dir.h"

namespace tandem {
namespace {

constexpr int64_t kVocab = 64;
constexpr uint64_t kSeed = 3;

// An empty folder `name` in this process's scratch directory (removed at exit): two runs of
// this binary at once share TMPDIR, never a folder.
std::string FreshDir(const std::string& name) {
  static const testing::ScratchDir root("eval_trained");
  std::string dir = root.File(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

models::TransformerConfig TargetConfig() {
  models::TransformerConfig c;
  c.family = models::ModelFamily::kQwen3;
  c.model_type = "qwen3";
  c.architectures = {"Qwen3ForCausalLM"};
  c.vocab_size = kVocab;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.rotary_dim = 16;
  c.intermediate_size = 128;
  c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.qk_norm = true;
  c.layer_types.assign(2, models::LayerType::kFullAttention);
  return c;
}

// The drafter's head dim: 16 (the target's) unless TANDEM_EVAL_FIXTURE_HEAD_DIM says otherwise.
// The committed decode fixture uses 64, a head dim the CUDA block attention takes, so that
// speculative_gpu_test decodes the same golden on the GPU.
int DrafterHeadDim() {
  const char* v = std::getenv("TANDEM_EVAL_FIXTURE_HEAD_DIM");
  return v ? std::atoi(v) : 16;
}

std::string JobText(const std::string& target, const std::string& ckpt, int steps) {
  return fmt::format(R"(
[job]
name = "eval-trained"
seed = {}
[store]
capacity_mb = 32
[channels.hidden]
capacity = 4
min_ready = 1
[actors.target]
class = "dflash.target"
out = "hidden"
model = "{}"
layers = [0, 1]
max_tokens = 256
doc_len = 64
batches_per_epoch = {}
[actors.drafter]
class = "dflash.drafter"
in = "hidden"
num_layers = 1
head_dim = {}
max_steps = {}
total_steps = 400
lr = 8e-3
anchors_per_batch = 64
log_every = 20
pinned_bytes = 8000000
checkpoint = {{ dir = "{}", every_steps = {} }}
)",
                     kSeed, target, steps, DrafterHeadDim(), steps, ckpt, steps);
}

TEST(EvalTrainedTest, TrainedDrafterHasClearlyHigherTau) {
  const std::vector<int32_t> perm = testing::DataPermutation(kVocab, kSeed);
  for (int32_t p : perm) ASSERT_GE(p, 0) << "the data did not visit every token";
  const std::string target = FreshDir("eval_target"), ckpt = FreshDir("eval_ckpt"),
                    untrained = FreshDir("eval_untrained");
  ASSERT_NO_FATAL_FAILURE(testing::WriteRuleTarget(target, TargetConfig(), perm));

  auto spec = ParseJobText(JobText(target, ckpt, 240), "eval-trained.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*spec);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  auto state = dflash::ReadLatestState(ckpt);
  ASSERT_TRUE(state.ok() && state->has_value());
  const std::string trained = (*state)->path;

  // The untrained drafter: the same config, initialised as the job does before step 0.
  auto config = models::LoadDFlashConfig(trained);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto fresh = models::DFlashDrafter::Create(*config, {.max_tokens = 64, .num_blocks = 1},
                                             kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->params().InitFromScratch(kSeed, nullptr).ok());
  ASSERT_TRUE(models::SaveDFlashCheckpoint(untrained, **fresh, {0, kSeed}).ok());

  models::SpecEvalRequest q;
  q.target_dir = target;
  q.prompts_file = testing::WriteRulePrompts(untrained, perm, 8);
  q.max_new_tokens = 48;
  q.drafter_dir = trained;
  auto good = models::RunSpecEval(q);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  q.drafter_dir = untrained;
  auto bad = models::RunSpecEval(q);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  const double tau_trained = good->run.tau, tau_untrained = bad->run.tau;
  fmt::print("tau trained {:.3f} untrained {:.3f}; tokens/s {:.1f} vs block size 1 {:.1f}\n",
             tau_trained, tau_untrained, good->run.tokens_per_s, good->baseline.tokens_per_s);
  EXPECT_EQ(good->run.generated_tokens, 8 * 48);
  // TANDEM_EVAL_FIXTURE_OUT=DIR keeps the target, the trained drafter and the prompts for
  // tests/golden/make_dflash_decode_golden.py (its inputs under tests/golden/dflash_decode_tiny).
  if (const char* out = std::getenv("TANDEM_EVAL_FIXTURE_OUT")) {
    namespace fs = std::filesystem;
    const fs::path root(out);
    fs::create_directories(root / "target");
    fs::create_directories(root / "drafter");
    for (const char* f : {"config.json", "model.safetensors"}) {
      fs::copy_file(fs::path(target) / f, root / "target" / f,
                    fs::copy_options::overwrite_existing);
      fs::copy_file(fs::path(trained) / f, root / "drafter" / f,
                    fs::copy_options::overwrite_existing);
    }
    fs::copy_file(q.prompts_file, root / "prompts.jsonl", fs::copy_options::overwrite_existing);
  }
  // Seen here: trained 5.2, untrained 1.0 (its drafts are noise over 64 ids).
  EXPECT_GE(tau_trained, 2.0);
  EXPECT_LT(tau_untrained, 1.2);
  EXPECT_GT(tau_trained, tau_untrained + 1.0);
}

}  // namespace
}  // namespace tandem
