// Checkpoint retention and the snapshot's budget, with the tiny CPU job through JobRunner and
// real files:
//   * checkpoint.keep_last removes older complete steps as `latest` moves, but never the step
//     DIR/best names;
//   * without pinned_bytes, a drafter with asynchronous checkpoints is counted by the job's
//     resource check for its snapshot (14 bytes per drafter parameter + 4), and runs.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "actors/dflash/drafter_eval_best.h"
#include "actors/dflash/job_test_util.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_params.h"
#include "models/io/safetensors.h"
#include "runtime/sched/resources.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;
using testing::FreshDir;

std::string Text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::set<std::string> StepDirs(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("step_", 0) == 0)
      out.insert(e.path().filename().string());
  return out;
}

TEST(CheckpointPolicyTest, KeepLastRemovesOlderStepsButNeverBest) {
  const std::string dir = FreshDir("ckpt_keep_last");
  testing::TinyJob job{.name = "keep-last", .batches_per_epoch = 100, .max_steps = 30,
                       .checkpoint_dir = dir, .checkpoint_every = 10};
  auto first = testing::RunJob(job);
  ASSERT_TRUE(first.ok() && first->status.ok())
      << (first.ok() ? first->ToString() : first.status().ToString());
  EXPECT_EQ(StepDirs(dir), (std::set<std::string>{"step_00000010", "step_00000020",
                                                  "step_00000030"}));  // keep_last = 0: all
  // As an evaluating run would point it (drafter_eval_best.h).
  ASSERT_TRUE(WriteBestCheckpoint(dir, {.step = 10, .tau = 2.5, .prompts = 4}).ok());
  job.max_steps = 60;
  job.checkpoint_extra = ", keep_last = 2";
  job.drafter_extra = "resume = true";
  auto second = testing::RunJob(job);
  ASSERT_TRUE(second.ok() && second->status.ok())
      << (second.ok() ? second->ToString() : second.status().ToString());
  EXPECT_EQ(Text(dir + "/latest"), "step_00000060\n");
  EXPECT_EQ(StepDirs(dir), (std::set<std::string>{"step_00000010", "step_00000050",
                                                  "step_00000060"}));
  EXPECT_TRUE(fs::exists(dir + "/step_00000010/model.safetensors"));
}

// The removals keep_last makes after a commit run beside the next checkpoint's write, not in
// its slot (on the H200 host removing a 15 GB step took 3-5 s, which held every write past
// the checkpoint cadence). An injected fault (hold_checkpoint_removal) keeps each removal waiting until the next
// checkpoint commits: that can only happen when the write does not wait for the removal, and
// then DIR/REMOVAL_OVERLAPPED_BY_TEST says so. On the writer's thread (the old place) the
// next write could not commit at all while a removal waited.
TEST(CheckpointPolicyTest, RemovalsDoNotHoldTheNextCheckpointsWrite) {
  const std::string dir = FreshDir("ckpt_removal_overlap");
  testing::TinyJob job{.name = "removal-overlap", .batches_per_epoch = 100, .max_steps = 30,
                       .checkpoint_dir = dir, .checkpoint_every = 10,
                       .checkpoint_extra = ", keep_last = 1",
                       .faults = {.hold_checkpoint_removal = true}};
  auto run = testing::RunJob(job);
  ASSERT_TRUE(run.ok() && run->status.ok())
      << (run.ok() ? run->ToString() : run.status().ToString());
  EXPECT_TRUE(fs::exists(dir + "/REMOVAL_OVERLAPPED_BY_TEST"));
  EXPECT_EQ(Text(dir + "/latest"), "step_00000030\n");
  // Every removal ran in the end: only the newest step is left.
  EXPECT_EQ(StepDirs(dir), (std::set<std::string>{"step_00000030"}));
}

// The tiny job without its pinned_bytes line.
std::string TinyJobWithoutPinned(const std::string& dir, const std::string& ck_extra) {
  return std::regex_replace(
      testing::TinyJobText({.name = "pinned-default", .batches_per_epoch = 100,
                            .max_steps = 20, .checkpoint_dir = dir, .checkpoint_every = 10,
                            .checkpoint_extra = ck_extra}),
      std::regex("pinned_bytes = [0-9]+[^\n]*\n"), "");
}

uint64_t DrafterPinnedOf(const sched::Placement& p) {
  for (const sched::ReplicaAssignment& r : p.replicas)
    if (r.group == "drafter") return r.pinned_bytes;
  return ~uint64_t{0};
}

TEST(CheckpointPolicyTest, WithoutPinnedBytesTheSnapshotIsSizedAndCounted) {
  const std::string dir = FreshDir("ckpt_pinned_default");
  const std::string text = TinyJobWithoutPinned(dir, "");
  ASSERT_EQ(text.find("pinned_bytes"), std::string::npos);
  auto spec = ParseJobText(text, "pinned-default.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*spec);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_NE(report->actors[1].summary.find("checkpoints 2 (async)"), std::string::npos)
      << report->ToString();
  // What the resource check counts: the snapshot of the drafter the checkpoint holds (its
  // config.json's parameter layout: bf16 weights + fp32 master, exp_avg, exp_avg_sq, and the
  // AdamW step), and no less than 14 bytes for each parameter in model.safetensors.
  auto config = models::LoadDFlashConfig(dir + "/step_00000020");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const uint64_t snapshot = static_cast<uint64_t>(
      models::DFlashHostState::Bytes(models::MakeDFlashParamLayout(*config)));
  auto model = models::SafetensorsReader::Open(dir + "/step_00000020/model.safetensors");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  uint64_t params = 0;
  for (const models::TensorInfo& t : model->tensors()) params += t.numel();
  EXPECT_GE(snapshot, params * 14 + 4);
  auto placed = JobRunner::PlaceOn(*spec, sched::FakeResources(0, 8, uint64_t{1} << 30));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(DrafterPinnedOf(*placed), snapshot);
  // A node with less pinned memory than the snapshot refuses the job, naming the group.
  auto small = JobRunner::PlaceOn(*spec, sched::FakeResources(0, 8, snapshot - 1));
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("pinned memory (drafter: 1×"), std::string::npos)
      << small.status().ToString();
  // Synchronous checkpoints need no snapshot: nothing is counted.
  auto sync = ParseJobText(TinyJobWithoutPinned(dir, ", async = false"), "sync.toml");
  ASSERT_TRUE(sync.ok()) << sync.status().ToString();
  auto sync_placed = JobRunner::PlaceOn(*sync, sched::FakeResources(0, 8, 1));
  ASSERT_TRUE(sync_placed.ok()) << sync_placed.status().ToString();
  EXPECT_EQ(DrafterPinnedOf(*sync_placed), 0u);
}

}  // namespace
}  // namespace tandem::dflash
