// Every job key is declared and checked: misspelled, ill-typed and out-of-range keys of the
// built-in actor classes are refused by JobRunner::Check (what `tandem validate`, `run` and
// `submit` call) before anything runs, with the file, the line, the key and the nearest valid
// key; the example jobs pass; docs/job-file.md carries the generated key reference.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "actors/dflash/drafter_settings.h"
#include "models/dflash/dflash_config.h"
#include "runtime/actor/registry.h"
#include "runtime/job/job_actor.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/job/runner.h"
#include "tests/support/scratch_dir.h"

namespace tandem {
namespace {

// A class that declares no keys: it works, and validation says its keys go unchecked.
class Undeclared final : public JobActor {
 public:
  explicit Undeclared(const ConfigValue&) {}
  Result<std::string> Run(JobEnv*) override { return std::string("ran"); }
};
TANDEM_REGISTER_ACTOR(Undeclared, "test.undeclared");

// The tiny CPU job; the drafter section is last, so appended keys land in it.
constexpr const char* kTiny = R"([job]
name = "tiny"
seed = 1

[channels.hidden]
capacity = 8

[actors.target]
class = "dflash.target"
out = "hidden"
model = "random"
target_config = { vocab_size = 512, hidden_size = 64, num_hidden_layers = 6, num_attention_heads = 4, num_key_value_heads = 2, head_dim = 16, intermediate_size = 128, max_position_embeddings = 512 }
layers = [1, 4]
max_tokens = 512
doc_len = 64

[actors.drafter]
class = "dflash.drafter"
in = "hidden"
max_steps = 10
)";
constexpr int kTinyLines = 20;  // the next appended line is job.toml:21

Status Check(const std::string& text, std::vector<std::string>* notes = nullptr) {
  auto job = ParseJobText(text, "job.toml");
  if (!job.ok()) return job.status();
  return JobRunner::Check(*job, notes);
}

std::string Problems(const std::string& appended) {
  Status st = Check(std::string(kTiny) + appended);
  return st.ok() ? "accepted" : std::string(st.message());
}

#define EXPECT_CONTAINS(haystack, needle)                                       \
  do {                                                                          \
    const std::string h_ = (haystack);                                          \
    EXPECT_NE(h_.find(needle), std::string::npos) << h_ << "\nlacks: " << (needle); \
  } while (0)

TEST(JobKeysTest, TinyJobIsValid) {
  std::vector<std::string> notes;
  Status st = Check(kTiny, &notes);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(notes.empty());
}

// Misspelled keys used to be ignored, and the job trained with the defaults.
TEST(JobKeysTest, MisspelledActorKeysAreRejectedWithFileLineAndSuggestion) {
  const std::string msg = Problems("anchor_per_batch = 128\nblok_size = 8\n");
  EXPECT_CONTAINS(msg, fmt::format("job.toml:{}: actors.drafter.anchor_per_batch: unknown key; "
                                   "did you mean anchors_per_batch?", kTinyLines + 1));
  EXPECT_CONTAINS(msg, fmt::format("job.toml:{}: actors.drafter.blok_size: unknown key; did you "
                                   "mean block_size?", kTinyLines + 2));
  // The old backoff key is not silently ignored either.
  EXPECT_CONTAINS(Problems("restart_backoff_ms = 10\n"),
                  "actors.drafter.restart_backoff_ms: unknown key; did you mean restart_backoff_s?");
  // A target key in the drafter's section is unknown there.
  EXPECT_CONTAINS(Problems("doc_len = 64\n"), "actors.drafter.doc_len: unknown key");
}

// Fault injection is a test seam (actors/dflash/drafter_faults.h), not a job key.
TEST(JobKeysTest, TestFaultsAreNotJobKeys) {
  EXPECT_CONTAINS(Problems("fail_at_step = 60\n"), "actors.drafter.fail_at_step: unknown key");
  EXPECT_CONTAINS(Problems("checkpoint = { dir = \"/tmp/x\", test_hold_write = 5 }\n"),
                  "actors.drafter.checkpoint.test_hold_write: unknown key");
  EXPECT_CONTAINS(Problems("checkpoint = { dir = \"/tmp/x\", test_hold_removal = true }\n"),
                  "actors.drafter.checkpoint.test_hold_removal: unknown key");
  EXPECT_CONTAINS(
      Problems("checkpoint = { dir = \"/tmp/x\", test_stall_write_at_step = 20 }\n"),
      "actors.drafter.checkpoint.test_stall_write_at_step: unknown key");
}

TEST(JobKeysTest, IllTypedKeysAreRejected) {
  EXPECT_CONTAINS(Problems("lr = \"fast\"\n"),
                  fmt::format("job.toml:{}: actors.drafter.lr: expected a finite number in "
                              "[0, 1], got a string \"fast\"", kTinyLines + 1));
  EXPECT_CONTAINS(Problems("num_layers = 2.5\n"), "actors.drafter.num_layers: expected an integer");
  EXPECT_CONTAINS(Problems("resume = 1\n"), "actors.drafter.resume: expected a boolean");
  EXPECT_CONTAINS(Problems("resume = \"yes\"\n"),
                  "actors.drafter.resume: \"yes\" is out of range");
  EXPECT_EQ(Problems("resume = \"force\"\n"), "accepted");
  EXPECT_CONTAINS(Problems("layer_types = [\"full_attention\", \"sliding\"]\n"),
                  "actors.drafter.layer_types[1]: \"sliding\" is out of range");
  EXPECT_CONTAINS(Problems("checkpoint = { dir = \"/tmp/x\", evry_steps = 5 }\n"),
                  "actors.drafter.checkpoint.evry_steps: unknown key; did you mean every_steps?");
}

// Values that used to pass validation and fail (or train wrongly) later.
TEST(JobKeysTest, OutOfRangeValuesAreRejectedBeforeWorkStarts) {
  EXPECT_CONTAINS(Problems("lr = -0.001\n"),
                  "actors.drafter.lr: -0.001 is out of range; expected a finite number in [0, 1]");
  EXPECT_CONTAINS(Problems("warmup_ratio = 1.5\n"), "actors.drafter.warmup_ratio: 1.5 is out of range");
  EXPECT_CONTAINS(Problems("warmup_ratio = -0.1\n"), "actors.drafter.warmup_ratio: -0.1 is out of range");
  EXPECT_CONTAINS(Problems("num_layers = 0\n"),
                  "actors.drafter.num_layers: 0 is out of range; expected an integer in [1, 64]");
  EXPECT_CONTAINS(Problems("block_size = 8\n"), "actors.drafter.block_size: 8 is out of range");
  EXPECT_EQ(Problems("block_size = 16\n"), "accepted");
  // mask_token_id must fall in the target's vocab (512, from its config).
  EXPECT_CONTAINS(Problems("mask_token_id = 512\n"),
                  fmt::format("job.toml:{}: actors.drafter.mask_token_id: 512 is outside the "
                              "target's vocab [0, 512)", kTinyLines + 1));
  EXPECT_EQ(Problems("mask_token_id = 511\n"), "accepted");
  EXPECT_CONTAINS(Problems("total_steps = 5\n"), "actors.drafter.total_steps: 5 is less than max_steps = 10");
  // At most max_tokens - 1 anchors are eligible in a batch (512 tokens here).
  EXPECT_CONTAINS(Problems("anchors_per_batch = 100000\n"),
                  fmt::format("job.toml:{}: actors.drafter.anchors_per_batch: 100000 blocks per "
                              "step, but a batch of the target group 'target' (max_tokens = "
                              "512) has at most 511 eligible anchors", kTinyLines + 1));
  EXPECT_EQ(Problems("anchors_per_batch = 511\n"), "accepted");
  EXPECT_CONTAINS(Check(std::string(kTiny).replace(std::string(kTiny).find("max_steps = 10"), 14,
                                                    "max_steps = 0")).ToString(),
                  "actors.drafter.max_steps: 0 is out of range");
  EXPECT_CONTAINS(Problems("[store]\ncapacity_mb = 17592186044416\n"),
                  "store.capacity_mb: 17592186044416 is out of range");
}

TEST(JobKeysTest, PathsAreCheckedBeforeWorkStarts) {
  EXPECT_CONTAINS(Problems("metrics_file = \"/nonexistent-tandem-dir/metrics.jsonl\"\n"),
                  fmt::format("job.toml:{}: actors.drafter.metrics_file: the directory "
                              "'/nonexistent-tandem-dir' does not exist", kTinyLines + 1));
  const testing::ScratchDir scratch;  // not a fixed name: two runs at once share TMPDIR
  const std::string file = scratch.File("not_a_dir");
  { std::ofstream(file) << "x"; }
  EXPECT_CONTAINS(Problems(fmt::format("checkpoint = {{ dir = \"{}\" }}\n", file)),
                  fmt::format("actors.drafter.checkpoint.dir: '{}' exists and is not a directory",
                              file));
  std::filesystem::remove(file);
  EXPECT_EQ(Problems(fmt::format("metrics_file = \"{}/m.jsonl\"\ncheckpoint = {{ dir = \"{}/ck\" }}\n",
                                 scratch.path(), scratch.path())),
            "accepted");
  // The target's data file must exist.
  std::string text = kTiny;
  text.replace(text.find("doc_len = 64"), 12, "data = \"/nonexistent-tandem-dir/train.jsonl\"");
  EXPECT_CONTAINS(Check(text).ToString(),
                  "actors.target.data: '/nonexistent-tandem-dir/train.jsonl' does not exist");
}

TEST(JobKeysTest, TargetKeysAreChecked) {
  std::string text = kTiny;
  text.replace(text.find("doc_len = 64"), 12, "doc_len = 1024\nmax_tokenz = 512");
  const std::string msg = Check(text).ToString();
  EXPECT_CONTAINS(msg, "job.toml:16: actors.target.max_tokenz: unknown key; did you mean max_tokens?");
  text = kTiny;
  text.replace(text.find("layers = [1, 4]"), 15, "layers = [1, 6]");
  EXPECT_CONTAINS(Check(text).ToString(),
                  "actors.target.layers: 6 is not a layer of the target (it has 6)");
}

TEST(JobKeysTest, ClassWithoutDeclaredKeysRunsButIsReported) {
  std::vector<std::string> notes;
  Status st = Check("[actors.u]\nclass = \"test.undeclared\"\nanything = 1\n", &notes);
  EXPECT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_CONTAINS(notes[0], "job.toml:1: actors.u: class 'test.undeclared' declares no keys");
  // Its group keys are still checked.
  EXPECT_CONTAINS(Check("[actors.u]\nclass = \"test.undeclared\"\nreplicas = 0\n").ToString(),
                  "actors.u.replicas: 0 is out of range");
}

TEST(JobKeysTest, ExampleJobsAreValid) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TANDEM_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".toml") continue;
    auto job = LoadJobFile(entry.path().string());
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    Status st = CheckActorSections(*job);  // not placement: the examples want up to 8 GPUs
    EXPECT_TRUE(st.ok()) << entry.path() << ": " << st.ToString();
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

// docs/job-file.md embeds `tandem keys` between two markers; a declaration changed without the
// doc (or the other way round) fails here. Regenerate with scripts/gen-job-keys-doc.sh.
TEST(JobKeysTest, DocListsEveryDeclaredKey) {
  std::ifstream in(TANDEM_SOURCE_DIR "/docs/job-file.md");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- BEGIN KEYS: generated by `tandem keys`; do not edit -->\n";
  const std::string end = "<!-- END KEYS -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/job-file.md lacks the marker " << begin;
  ASSERT_NE(e, std::string::npos);
  const std::string embedded = doc.substr(b + begin.size(), e - b - begin.size());
  // test.undeclared declares nothing, so it is not part of the reference either way.
  const std::string expected = KeyReferenceMarkdown();
  if (embedded != expected) {
    std::istringstream a(embedded), b(expected);
    std::string la, lb;
    int line = 0;
    while (++line, std::getline(a, la) && std::getline(b, lb) && la == lb) {
    }
    ADD_FAILURE() << "docs/job-file.md is out of date (regenerate it with "
                     "scripts/gen-job-keys-doc.sh); first difference at line " << line
                  << " of the key reference:\n  doc:          " << la
                  << "\n  declarations: " << lb;
  }
  for (const char* cls : {"dflash.target", "dflash.drafter", "demo.producer", "demo.consumer"})
    EXPECT_CONTAINS(embedded, fmt::format("### `{}`", cls));
}

// A checkpoint dir is made at the start; one that cannot be (its nearest existing parent is a
// file, or not writable) is refused before work starts, naming both.
TEST(JobKeysTest, CheckpointDirThatCannotBeCreatedIsRefused) {
  const testing::ScratchDir scratch;
  const std::string file = scratch.File("a_file");
  { std::ofstream(file) << "x"; }
  EXPECT_CONTAINS(Problems(fmt::format("checkpoint = {{ dir = \"{}/sub/ck\" }}\n", file)),
                  fmt::format("actors.drafter.checkpoint.dir: '{}/sub/ck' cannot be created: "
                              "'{}' is not a writable directory", file, file));
}

// is_causal applies to every drafter layer; a bidirectional sliding layer needs a window
// that reaches the whole block (models/dflash/dflash_config.h, CheckDFlashMask).
TEST(JobKeysTest, IsCausalMasksTheKernelsCannotTrainAreRefused) {
  const std::string sliding =
      "layer_types = [\"sliding_attention\", \"full_attention\"]\n";
  EXPECT_CONTAINS(Problems("is_causal = false\n" + sliding + "sliding_window = 8\n"),
                  "actors.drafter.is_causal: key 'is_causal': false with sliding_window 8 < "
                  "block_size 16");
  EXPECT_EQ(Problems("is_causal = false\n" + sliding + "sliding_window = 16\n"), "accepted");
  EXPECT_EQ(Problems("is_causal = true\n" + sliding + "sliding_window = 8\n"), "accepted");
  EXPECT_CONTAINS(Problems("is_causal = \"no\"\n"), "actors.drafter.is_causal: expected a boolean");
}

TEST(JobKeysTest, LossDecayAndAnchorsPerSequenceAreChecked) {
  EXPECT_CONTAINS(Problems("loss_decay = 0\n"), "actors.drafter.loss_decay: 0 is out of range");
  EXPECT_EQ(Problems("loss_decay = 4\n"), "accepted");
  EXPECT_CONTAINS(Problems("anchors_per_sequence = 100\n"),
                  fmt::format("job.toml:{}: actors.drafter.anchors_per_sequence: 100 anchors per "
                              "document, but a step has anchors_per_batch = 64 blocks",
                              kTinyLines + 1));
  EXPECT_EQ(Problems("anchors_per_sequence = 32\n"), "accepted");
  EXPECT_EQ(Problems("anchors_per_sequence = 100\nanchors_per_batch = 200\n"), "accepted");
}

// init_from names a drafter checkpoint of the drafter the group trains, for its target.
TEST(JobKeysTest, InitFromMustHoldThisDrafterForThisTarget) {
  const testing::ScratchDir scratch;
  EXPECT_CONTAINS(Problems(fmt::format("init_from = \"{}\"\n", scratch.File("none"))),
                  fmt::format("actors.drafter.init_from: '{}' is not a directory",
                              scratch.File("none")));
  auto job = ParseJobText(kTiny, "job.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const ActorGroupSpec* group = nullptr;
  for (const ActorGroupSpec& g : job->actors)
    if (g.name == "drafter") group = &g;
  ASSERT_NE(group, nullptr);
  auto ds = dflash::ParseDrafterSettings(group->settings, JobSectionContext(*job, "drafter"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_DOUBLE_EQ(ds->loss_decay, 7.0);  // the default at block 16
  const models::DFlashConfig own = dflash::DrafterConfig(*ds, ds->target);
  const std::string dir = scratch.File("drafter");
  std::filesystem::create_directories(dir);
  const std::string key = fmt::format("init_from = \"{}\"\n", dir);
  ASSERT_TRUE(models::WriteDFlashConfig(dir + "/config.json", own).ok());
  EXPECT_CONTAINS(Problems(key), "model.safetensors' does not exist");
  { std::ofstream(dir + "/model.safetensors") << "weights are read when the drafter starts"; }
  EXPECT_EQ(Problems(key), "accepted");

  models::DFlashConfig deeper = own;
  deeper.layers.num_hidden_layers = 3;
  deeper.layers.layer_types.push_back(models::LayerType::kFullAttention);
  ASSERT_TRUE(models::WriteDFlashConfig(dir + "/config.json", deeper).ok());
  EXPECT_CONTAINS(Problems(key), "key 'num_hidden_layers' is 3, but the drafter this group "
                                 "trains has 2; set num_layers to match");
  models::DFlashConfig other = own;
  other.layers.vocab_size = 1024;
  ASSERT_TRUE(models::WriteDFlashConfig(dir + "/config.json", other).ok());
  EXPECT_CONTAINS(Problems(key), "is a drafter for another target: key 'vocab_size' is 1024, "
                                 "the target group 'target' has 512");
}

// drafter_type = "dflash2": its keys with their defaults, checked against the target; a
// DFlash2 key without it is refused naming the key; init_from of a DFlash checkpoint names
// the architecture.
TEST(JobKeysTest, DFlash2DrafterKeys) {
  const std::string d2 = "drafter_type = \"dflash2\"\n";
  EXPECT_EQ(Problems(d2), "accepted");
  EXPECT_EQ(Problems(d2 + "conv_kernel_size = 3\nconv_group_size = 8\nselector_rank = 8\n"
                          "selector_top_k = 5\nfinal_logit_softcapping = 30.0\n"
                          "selector_loss_weight = 0.1\n"), "accepted");
  EXPECT_CONTAINS(Problems("selector_rank = 8\n"),
                  "actors.drafter.selector_rank: a DFlash2 setting; it needs drafter_type = "
                  "\"dflash2\"");
  EXPECT_CONTAINS(Problems("drafter_type = \"dflash3\"\n"), "actors.drafter.drafter_type");
  EXPECT_CONTAINS(Problems(d2 + "conv_group_size = 48\n"),
                  "actors.drafter.conv_group_size: 48 does not divide the target's hidden_size 64");
  // The key ranges are the selector kernels' limits (kernels/dflash2/selector.h).
  EXPECT_EQ(Problems(d2 + "selector_top_k = 64\nselector_rank = 2048\n"), "accepted");
  EXPECT_CONTAINS(Problems(d2 + "selector_top_k = 65\n"),
                  "actors.drafter.selector_top_k: 65 is out of range; expected an integer in [1, 64]");
  EXPECT_CONTAINS(Problems(d2 + "selector_rank = 2049\n"),
                  "actors.drafter.selector_rank: 2049 is out of range; expected an integer in [1, 2048]");
  EXPECT_CONTAINS(Problems(d2 + "conv_kernel_size = 0\n"), "actors.drafter.conv_kernel_size");
  EXPECT_CONTAINS(Problems(d2 + "output_multiplier = 0\n"), "actors.drafter.output_multiplier");
  EXPECT_CONTAINS(Problems(d2 + "final_logit_softcapping = -1.0\n"),
                  "actors.drafter.final_logit_softcapping");
  EXPECT_CONTAINS(Problems(d2 + "selector_loss_weight = -1.0\n"),
                  "actors.drafter.selector_loss_weight");
  EXPECT_EQ(Problems(d2 + "input_embedding_scale = 1.5\n"), "accepted");
  EXPECT_CONTAINS(Problems(d2 + "input_embedding_scale = 0.0\n"),
                  "actors.drafter.input_embedding_scale");
  // The FP8 LM head runs DFlash2's logit transform and top-k too.
  EXPECT_EQ(Problems(d2 + "lm_head_precision = \"fp8\"\n"), "accepted");
  // An eval table: the training eval proposes with the selector.
  const testing::ScratchDir eval_dir;
  const std::string prompts = eval_dir.File("prompts.jsonl");
  { std::ofstream(prompts) << "{\"input_ids\": [1, 2, 3]}\n"; }
  EXPECT_EQ(Problems(d2 + "selector_rank = 8\n\n[actors.drafter.eval]\nevery_steps = 10\n"
                     "prompts = \"" + prompts + "\"\n"), "accepted");

  auto job = ParseJobText(std::string(kTiny) + d2 + "selector_rank = 8\n", "job.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const ActorGroupSpec* group = nullptr;
  for (const ActorGroupSpec& g : job->actors)
    if (g.name == "drafter") group = &g;
  ASSERT_NE(group, nullptr);
  auto ds = dflash::ParseDrafterSettings(group->settings, JobSectionContext(*job, "drafter"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_TRUE(ds->dflash2.has_value());
  EXPECT_EQ(ds->dflash2->conv_kernel_size, 2);
  EXPECT_EQ(ds->dflash2->conv_group_size, 16);
  EXPECT_EQ(ds->dflash2->selector_rank, 8);
  EXPECT_EQ(ds->dflash2->selector_top_k, 16);
  EXPECT_FALSE(ds->dflash2->final_logit_softcapping.has_value());
  EXPECT_DOUBLE_EQ(ds->selector_loss_weight, 1.0);
  const models::DFlashConfig config = dflash::DrafterConfig(*ds, ds->target);
  EXPECT_EQ(config.is_causal, false);  // DFlash2's default mask
  EXPECT_EQ(config.dflash2, ds->dflash2);
  EXPECT_FLOAT_EQ(dflash::DrafterTrainOptions(*ds, ds->target).selector_loss_weight, 1.0f);

  // init_from a DFlash drafter where a DFlash2 one is trained: the architecture is named.
  const testing::ScratchDir scratch;
  const std::string dir = scratch.File("dflash");
  std::filesystem::create_directories(dir);
  models::DFlashConfig plain = config;
  plain.dflash2.reset();
  plain.is_causal.reset();
  plain.layers.architectures = {"DFlashDraftModel"};
  ASSERT_TRUE(models::WriteDFlashConfig(dir + "/config.json", plain).ok());
  { std::ofstream(dir + "/model.safetensors") << "weights are read when the drafter starts"; }
  const std::string key = fmt::format("init_from = \"{}\"\n", dir);
  EXPECT_CONTAINS(Problems(d2 + "selector_rank = 8\n" + key), "key 'is_causal'");
  plain.is_causal = false;
  ASSERT_TRUE(models::WriteDFlashConfig(dir + "/config.json", plain).ok());
  EXPECT_CONTAINS(Problems(d2 + "selector_rank = 8\n" + key),
                  "key 'architectures' is DFlashDraftModel, but the drafter this group trains "
                  "has DFlash2DraftModel; set drafter_type to match");
  ASSERT_TRUE(models::WriteDFlashConfig(dir + "/config.json", config).ok());
  EXPECT_EQ(Problems(d2 + "selector_rank = 8\n" + key), "accepted");
  EXPECT_CONTAINS(Problems(d2 + key), "key 'dflash_config.selector_rank' is 8, but the drafter "
                                      "this group trains has 256; set selector_rank to match");
}

}  // namespace
}  // namespace tandem
