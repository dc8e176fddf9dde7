// The tiny DFlash job end to end on the CPU through JobRunner: the loss falls, checkpoints
// are written, the store is empty afterwards, every batch passes its checksum, and a drafter
// that throws is restarted from its checkpoint and the job completes; a warm start from an
// exported drafter.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/job_test_util.h"

namespace tandem {
namespace {

using dflash::testing::FreshDir;

// The tiny job with one drafter that logs metrics to `dir`; `extra` adds drafter lines,
// `faults` injects faults into it.
Result<JobReport> RunJob(const std::string& dir, int max_steps, const std::string& extra,
                         dflash::DrafterFaults::Plan faults = {}) {
  return dflash::testing::RunJob(
      {.name = "tiny-test",
       .max_steps = max_steps,
       .checkpoint_dir = dir,
       .drafter_extra = fmt::format("metrics_file = \"{}/metrics.jsonl\"\n{}", dir, extra),
       .faults = faults});
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

TEST(DFlashJobTest, LossFallsCheckpointsAndStoreEmpties) {
  const std::string dir = FreshDir("dflash_train");
  auto report = RunJob(dir, 200, "");
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

// The data runs out at step 7, before max_steps and between logs (every 10): the last step
// is still logged, so the summary says what the loss was instead of "loss nan -> nan".
TEST(DFlashJobTest, ARunThatEndsBetweenLogsLogsItsLastStep) {
  const std::string dir = FreshDir("dflash_short_data");
  auto report = dflash::testing::RunJob(
      {.name = "short-data", .batches_per_epoch = 7, .max_steps = 20, .checkpoint_dir = dir,
       .drafter_extra = fmt::format("metrics_file = \"{}/metrics.jsonl\"\n", dir)});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  const std::string text = report->ToString();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("steps 7 \\(from 0\\), loss ([0-9.]+) -> "
                                                    "([0-9.]+)")))
      << text;
  EXPECT_GT(std::stod(m[1]), 0.0);
  EXPECT_GT(std::stod(m[2]), 0.0);
  EXPECT_EQ(Losses(dir + "/metrics.jsonl").size(), 1u);  // step 7 only
}

TEST(DFlashJobTest, StopAndResumeGivesTheSameLossCurve) {
  const std::string full = FreshDir("dflash_full"), split = FreshDir("dflash_split");
  const std::string sched = "total_steps = 60\n";
  auto a = RunJob(full, 60, sched);
  ASSERT_TRUE(a.ok() && a->status.ok());
  auto b1 = RunJob(split, 30, sched);
  ASSERT_TRUE(b1.ok() && b1->status.ok());
  auto b2 = RunJob(split, 60, sched + "resume = true\n");
  ASSERT_TRUE(b2.ok() && b2->status.ok()) << b2->ToString();
  EXPECT_EQ(b2->store.live_objects, 0u);
  // Bitwise on the CPU: same weights, optimizer state, data position and RNG (step).
  EXPECT_EQ(Losses(full + "/metrics.jsonl"), Losses(split + "/metrics.jsonl"));
}

TEST(DFlashJobTest, ThrowingDrafterIsRestartedFromItsCheckpoint) {
  const std::string dir = FreshDir("dflash_fault");
  auto report = RunJob(dir, 80, "max_restarts = 1\n", {.fail_at_step = 60});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  ASSERT_EQ(report->actors.size(), 2u);
  EXPECT_EQ(report->actors[1].restarts, 1) << report->ToString();
  EXPECT_NE(report->actors[1].summary.find("from 50"), std::string::npos) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
}

// init_from starts from an exported drafter: its loss starts where that drafter's ended, not
// where a random init's does; and a resumed run continues from its own checkpoint, not from
// init_from again (the split run's curve is the unbroken one's, bit for bit).
TEST(DFlashJobTest, InitFromStartsFromTheExportAndResumeWinsOverIt) {
  const std::string first = FreshDir("dflash_export");
  auto a = RunJob(first, 60, "");
  ASSERT_TRUE(a.ok() && a->status.ok()) << (a.ok() ? a->ToString() : a.status().ToString());
  auto exported = dflash::ReadLatestState(first);
  ASSERT_TRUE(exported.ok() && exported->has_value());
  const std::vector<double> scratch = Losses(first + "/metrics.jsonl");
  ASSERT_FALSE(scratch.empty());

  const std::string warm = fmt::format("init_from = \"{}\"\ntotal_steps = 40\n",
                                       (*exported)->path);
  const std::string full = FreshDir("dflash_warm_full"), split = FreshDir("dflash_warm_split");
  auto b = RunJob(full, 40, warm);
  ASSERT_TRUE(b.ok() && b->status.ok()) << (b.ok() ? b->ToString() : b.status().ToString());
  const std::vector<double> warmed = Losses(full + "/metrics.jsonl");
  ASSERT_FALSE(warmed.empty());
  EXPECT_LT(warmed.front(), 0.85 * scratch.front())
      << "warm " << fmt::format("{}", fmt::join(warmed, " ")) << " vs scratch "
      << fmt::format("{}", fmt::join(scratch, " "));
  auto c1 = RunJob(split, 20, warm);
  ASSERT_TRUE(c1.ok() && c1->status.ok());
  auto c2 = RunJob(split, 40, warm + "resume = true\n");
  ASSERT_TRUE(c2.ok() && c2->status.ok()) << c2->ToString();
  EXPECT_EQ(Losses(full + "/metrics.jsonl"), Losses(split + "/metrics.jsonl"));
}

}  // namespace
}  // namespace tandem
