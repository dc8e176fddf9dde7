// The tiny DFlash job end to end on the CPU through JobRunner: the loss falls, checkpoints
// are written, the store is empty afterwards, every batch passes its checksum, and a drafter
// that throws is restarted from its checkpoint and the job completes.
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "actors/dflash/checkpoint_state.h"
#include "runtime/control/job_spec.h"
#include "runtime/control/runner.h"

namespace tandem {
namespace {

std::string TinyJob(const std::string& dir, int max_steps, const std::string& extra) {
  return fmt::format(R"(
[job]
name = "tiny-test"
seed = 1
[store]
capacity_mb = 32
[channels.hidden]
capacity = 4
min_ready = 1
[actors.target]
class = "dflash.target"
out = "hidden"
model = "random"
target_config = {{ vocab_size = 128, hidden_size = 64, num_hidden_layers = 6, num_attention_heads = 4, num_key_value_heads = 2, head_dim = 16, intermediate_size = 128, max_position_embeddings = 512 }}
layers = [1, 4]
max_tokens = 256
doc_len = 64
batches_per_epoch = 400
[actors.drafter]
class = "dflash.drafter"
in = "hidden"
num_layers = 1
max_steps = {}
lr = 3e-3
anchors_per_batch = 16
log_every = 10
checkpoint = {{ dir = "{}", every_steps = 50 }}
metrics_file = "{}/metrics.jsonl"
{}
)",
                     max_steps, dir, dir, extra);
}

std::vector<double> Losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream f(path);
  std::string line;
  std::regex re("\"loss\": ([0-9.eE+-]+)");
  for (std::smatch m; std::getline(f, line);)
    if (std::regex_search(line, m, re)) out.push_back(std::stod(m[1]));
  return out;
}

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/dflash_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

Result<JobReport> RunJob(const std::string& text) {
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(text, "tiny-test.toml"));
  JobRunner runner;
  return runner.Run(job);
}

TEST(DFlashJobTest, LossFallsCheckpointsAndStoreEmpties) {
  const std::string dir = FreshDir("train");
  auto report = RunJob(TinyJob(dir, 200, ""));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
  std::vector<double> losses = Losses(dir + "/metrics.jsonl");
  ASSERT_EQ(losses.size(), 20u);
  // The next tokens are a fixed function of the anchor (5% noise): a drafter that learns
  // anything drops well below the first logged loss; 25% is far outside step-to-step noise.
  EXPECT_LT(losses.back(), 0.75 * losses.front()) << fmt::format("{}", fmt::join(losses, " "));
  auto state = dflash::ReadLatestState(dir);
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->step, 200);
  EXPECT_TRUE(std::filesystem::exists((*state)->path + "/model.safetensors"));
  EXPECT_NE(report->ToString().find("checksum mismatches 0"), std::string::npos);
}

TEST(DFlashJobTest, StopAndResumeGivesTheSameLossCurve) {
  const std::string full = FreshDir("full"), split = FreshDir("split");
  const std::string sched = "total_steps = 60\n";
  auto a = RunJob(TinyJob(full, 60, sched));
  ASSERT_TRUE(a.ok() && a->status.ok());
  auto b1 = RunJob(TinyJob(split, 30, sched));
  ASSERT_TRUE(b1.ok() && b1->status.ok());
  auto b2 = RunJob(TinyJob(split, 60, sched + "resume = true\n"));
  ASSERT_TRUE(b2.ok() && b2->status.ok()) << b2->ToString();
  EXPECT_EQ(b2->store.live_objects, 0u);
  // Bitwise on the CPU: same weights, optimizer state, data position and RNG (step).
  EXPECT_EQ(Losses(full + "/metrics.jsonl"), Losses(split + "/metrics.jsonl"));
}

TEST(DFlashJobTest, ThrowingDrafterIsRestartedFromItsCheckpoint) {
  const std::string dir = FreshDir("fault");
  auto report = RunJob(TinyJob(dir, 80, "fail_at_step = 60\nmax_restarts = 1\n"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  ASSERT_EQ(report->actors.size(), 2u);
  EXPECT_EQ(report->actors[1].restarts, 1) << report->ToString();
  EXPECT_NE(report->actors[1].summary.find("from 50"), std::string::npos) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
}

}  // namespace
}  // namespace tandem
